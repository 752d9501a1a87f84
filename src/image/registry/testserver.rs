//! A registry stand-in for unit tests: a thread answering each connection with what a
//! handler makes of the request, until dropped.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

#[derive(Clone, Debug)]
pub struct Req {
    pub target: String,
    pub headers: Vec<(String, String)>,
}

impl Req {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

pub struct Server {
    pub port: u16,
    pub seen: Arc<Mutex<Vec<Req>>>,
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

type Handler = dyn Fn(&Req, u16) -> Vec<u8> + Send + Sync;

impl Server {
    pub fn start(handler: impl Fn(&Req, u16) -> Vec<u8> + Send + Sync + 'static) -> Server {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let handler: Arc<Handler> = Arc::new(handler);
        let (s2, st2) = (seen.clone(), stop.clone());
        let thread = thread::spawn(move || {
            for c in l.incoming() {
                if st2.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(c) = c else { continue };
                let Some(req) = read_req(&c) else { continue };
                s2.lock().unwrap().push(req.clone());
                let _ = (&c).write_all(&handler(&req, port));
            }
        });
        Server {
            port,
            seen,
            stop,
            thread: Some(thread),
        }
    }

    pub fn targets(&self) -> Vec<String> {
        let seen = self.seen.lock().unwrap();
        seen.iter().map(|r| r.target.clone()).collect()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn read_req(c: &TcpStream) -> Option<Req> {
    let mut r = BufReader::new(c);
    let mut first = String::new();
    r.read_line(&mut first).ok()?;
    let target = first.split(' ').nth(1)?.to_string();
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).ok()? == 0 || line == "\r\n" {
            break;
        }
        let (k, v) = line.split_once(':')?;
        headers.push((k.trim().to_string(), v.trim().to_string()));
    }
    Some(Req { target, headers })
}

/// Direct connections (no proxy), the system's roots, `timeout`.
pub fn net(timeout: std::time::Duration) -> super::conn::Net {
    super::conn::Net {
        #[cfg(feature = "tls")]
        tls: super::tls::config(&[]).unwrap(),
        #[cfg(not(feature = "tls"))]
        tls: super::conn::Tls,
        timeout,
        proxies: Default::default(),
    }
}

/// A whole answer with a Content-Length.
pub fn answer(status: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut out = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\n", body.len());
    for (k, v) in headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    let mut out = out.into_bytes();
    out.extend_from_slice(body);
    out
}
