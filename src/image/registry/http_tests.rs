use super::*;
use crate::image::registry::testserver::net;
use std::net::TcpListener;
use std::thread;

/// Serves each answer in turn to one connection each, after reading the request's head;
/// returns the URL and the requests seen.
pub fn serve(answers: Vec<Vec<u8>>) -> (Url, thread::JoinHandle<Vec<String>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let h = thread::spawn(move || {
        let mut seen = Vec::new();
        for a in answers {
            let (mut s, _) = l.accept().unwrap();
            let mut r = BufReader::new(s.try_clone().unwrap());
            let mut req = String::new();
            loop {
                let mut line = String::new();
                if r.read_line(&mut line).unwrap() == 0 || line == "\r\n" {
                    break;
                }
                req.push_str(&line);
            }
            seen.push(req);
            // A write may fail when the client gave up first; that is its business.
            let _ = s.write_all(&a);
        }
        seen
    });
    let url = Url::parse(&format!("http://127.0.0.1:{port}/v2/")).unwrap();
    (url, h)
}

const T: Duration = Duration::from_secs(5);

fn get(url: &Url) -> Response {
    send("GET", url, &[("Accept", "x/y".into())], &net(T)).unwrap()
}

#[test]
fn reads_a_length_body_and_sends_the_headers() {
    let (url, h) = serve(vec![
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: 1\r\nx-a: 2\r\n\r\nhello".to_vec(),
    ]);
    let mut r = get(&url);
    assert_eq!((r.status, r.content_length()), (200, Some(5)));
    assert_eq!(r.headers("X-a").collect::<Vec<_>>(), ["1", "2"]);
    assert_eq!(r.read_body(100).unwrap(), b"hello");
    let req = &h.join().unwrap()[0];
    assert!(req.starts_with("GET /v2/ HTTP/1.1\r\n"), "{req}");
    assert!(
        req.contains(&format!("Host: 127.0.0.1:{}\r\n", url.port)),
        "{req}"
    );
    assert!(req.contains("Accept: x/y\r\n"), "{req}");
}

#[test]
fn reads_a_chunked_body() {
    let (url, h) = serve(vec![
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
          5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nTrailer: x\r\n\r\n"
            .to_vec(),
    ]);
    let mut r = get(&url);
    assert_eq!(r.content_length(), None);
    assert_eq!(r.read_body(100).unwrap(), b"hello world");
    h.join().unwrap();
}

#[test]
fn a_body_cut_short_or_too_long_is_an_error() {
    let (url, h) = serve(vec![
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello".to_vec(),
        b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nhello".to_vec(),
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel".to_vec(),
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n".to_vec(),
    ]);
    let e = get(&url).read_body(100).unwrap_err().to_string();
    assert!(e.contains("closed after 5 of the 10 bytes"), "{e}");
    let e = get(&url).read_body(100).unwrap_err().to_string();
    assert!(e.contains("longer than the 3 bytes"), "{e}");
    let e = get(&url).read_body(100).unwrap_err().to_string();
    assert!(e.contains("inside a chunk"), "{e}");
    let e = get(&url).read_body(100).unwrap_err().to_string();
    assert!(e.contains("invalid chunk size"), "{e}");
    h.join().unwrap();
}

#[test]
fn a_body_over_the_limit_is_refused() {
    let (url, h) = serve(vec![
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello".to_vec()
    ]);
    let e = get(&url).read_body(4).unwrap_err();
    assert!(
        matches!(e, crate::image::Error::Exchange { step: crate::image::Step::Body, ref url, .. } if url.ends_with('/')),
        "{e:?}"
    );
    assert!(e.to_string().contains("larger than 4 bytes"), "{e}");
    h.join().unwrap();
}

#[test]
fn head_and_no_content_have_no_body() {
    let (url, h) = serve(vec![
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n".to_vec(),
        b"HTTP/1.1 204 No Content\r\n\r\n".to_vec(),
    ]);
    let mut r = send("HEAD", &url, &[], &net(T)).unwrap();
    assert_eq!(r.read_body(10).unwrap(), b"");
    assert_eq!(get(&url).read_body(10).unwrap(), b"");
    h.join().unwrap();
}

#[test]
fn a_server_that_never_answers_times_out() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = Url::parse(&format!("http://{}/v2/", l.local_addr().unwrap())).unwrap();
    let e = send("GET", &url, &[], &net(Duration::from_millis(300)))
        .err()
        .unwrap();
    assert!(
        e.msg.contains("no answer for 300ms (the registry hangs)"),
        "{}",
        e.msg
    );
    assert!(!e.not_http);
    drop(l);
}

#[test]
fn a_server_that_closes_or_talks_nonsense_is_an_error() {
    let (url, h) = serve(vec![b"".to_vec(), b"garbage\r\n\r\n".to_vec()]);
    let e = send("GET", &url, &[], &net(T)).err().unwrap();
    assert!(
        e.msg.contains("without answering") && e.not_http,
        "{}",
        e.msg
    );
    let e = send("GET", &url, &[], &net(T)).err().unwrap();
    assert!(
        e.msg.contains("malformed HTTP answer") && e.not_http,
        "{}",
        e.msg
    );
    h.join().unwrap();
}

#[test]
fn a_buffered_body_is_read_again() {
    let (url, h) = serve(vec![b"HTTP/1.0 400 Bad Request\r\n\r\nplain text".to_vec()]);
    let mut r = get(&url);
    assert_eq!(r.buffer_body(100).unwrap(), b"plain text");
    assert_eq!(r.read_body(100).unwrap(), b"plain text");
    h.join().unwrap();
}
