//! The status socket's server, driven by the supervisor's poll loop: it never blocks and
//! can never stall the pod. Connections are bounded in number, idle ones are dropped,
//! requests are size-limited (see `http`), peers are checked with SO_PEERCRED (root or
//! our own uid), and watch streams have bounded buffers: a slow watcher is dropped, never
//! waited for.

use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::http::{self, Request};
use super::Error;

/// Connections served at once; more are answered 503 and closed.
pub const MAX_CONNECTIONS: usize = 64;
/// A client that sends nothing for this long (outside a watch) is dropped.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes queued for one client; a watcher that falls this far behind is dropped.
pub const MAX_QUEUED: usize = 1 << 20;

/// What a watch stream carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stream {
    Pod,
    Events,
    /// A container's log, followed: its name, and whether each line carries its time.
    Log(String, bool),
    /// A container's output as it comes, raw, for `podinit attach`.
    Attach(String),
}

/// Input an attach session holds for its container, at most: past it the client is not
/// read until the container has taken some.
pub const MAX_ATTACH_INPUT: usize = 64 << 10;

/// The supervisor's answer to a request.
pub enum Reply {
    Full {
        code: u16,
        content_type: &'static str,
        body: Vec<u8>,
    },
    /// Start a chunked stream: send `initial` chunks now, then whatever is broadcast.
    Watch {
        stream: Stream,
        content_type: &'static str,
        initial: Vec<Vec<u8>>,
    },
    /// The answer comes later, through [`Server::complete`] with this token (an exec that
    /// runs until its command exits). The client is not timed out meanwhile.
    Deferred(u64),
    /// Attach the client to a container: a head, then the container's output raw until
    /// it ends, and, with `stdin`, what the client sends taken as the container's input.
    Attach { container: String, stdin: bool },
}

struct Conn {
    sock: UnixStream,
    inbuf: Vec<u8>,
    out: Vec<u8>,
    sent: usize,
    last_active: Instant,
    watch: Option<Stream>,
    close_after_write: bool,
    /// Waiting for a deferred answer: its token, and whether to close after it.
    deferred: Option<(u64, bool)>,
    /// Streams without chunks (an HTTP/1.0 watcher): the end is the connection's close.
    raw_stream: bool,
    /// Requests that arrived behind a deferred one wait in `inbuf` to be answered.
    backlog: bool,
    /// An attach session taking input: what the client sends is the container's input,
    /// held in `inbuf` until the supervisor takes it.
    attach_input: bool,
    /// The attach client closed its sending side: its input has ended.
    input_eof: bool,
}

pub struct Server {
    listener: UnixListener,
    path: PathBuf,
    conns: Vec<Conn>,
    uid: u32,
}

/// Which of the server's fds a poll entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    Listener,
    Conn(usize),
}

impl Server {
    /// Bind the socket (mode 0600), replacing a stale one.
    pub fn bind(path: &Path) -> io::Result<Server> {
        let _ = std::fs::remove_file(path);
        // Created under a restrictive umask so that it is never reachable by others, even
        // for the instant before the chmod.
        let what =
            |e: io::Error| io::Error::new(e.kind(), format!("binding {}: {e}", path.display()));
        let (_dir, addr) = crate::sys::unix_socket::socket_path(path).map_err(what)?;
        use nix::sys::stat::{umask, Mode};
        let old = umask(Mode::from_bits_truncate(0o177));
        let l = UnixListener::bind(&addr);
        umask(old);
        let listener = l.map_err(what)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
        listener.set_nonblocking(true)?;
        Ok(Server {
            listener,
            path: path.to_path_buf(),
            conns: Vec::new(),
            uid: nix::unistd::geteuid().as_raw(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The fds to poll and what for.
    pub fn poll_set(&self) -> Vec<(BorrowedFd<'_>, bool, Slot)> {
        let mut v = vec![(self.listener.as_fd(), false, Slot::Listener)];
        for (i, c) in self.conns.iter().enumerate() {
            // A client that half-closed while its answer is deferred stays readable (EOF)
            // and has nothing to say: leave it out until the answer is there.
            if c.deferred.is_some() && c.close_after_write {
                continue;
            }
            // Attach input waits for the container past its bound, and ends at EOF: poll
            // such a client only to write to it.
            let want_out = c.sent < c.out.len();
            let input_held = c.input_eof || (c.attach_input && c.inbuf.len() >= MAX_ATTACH_INPUT);
            if input_held && !want_out {
                continue;
            }
            v.push((c.sock.as_fd(), want_out, Slot::Conn(i)));
        }
        v
    }

    /// When the next idle client must be dropped.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.conns
            .iter()
            .filter(|c| c.watch.is_none() && c.deferred.is_none())
            .map(|c| c.last_active + IDLE_TIMEOUT)
            .min()
    }

    /// Accept, read, answer and write whatever is ready; drop idle clients.
    pub fn service(&mut self, ready: &[Slot], handler: &mut dyn FnMut(&Request) -> Reply) {
        for &slot in ready {
            match slot {
                Slot::Listener => self.accept(),
                Slot::Conn(i) if i < self.conns.len() => {
                    if self.read(i) {
                        self.answer(i, handler);
                    }
                    self.flush(i);
                }
                Slot::Conn(_) => {}
            }
        }
        for i in 0..self.conns.len() {
            let c = &mut self.conns[i];
            if std::mem::take(&mut c.backlog) && !c.close_after_write {
                self.answer(i, handler);
                self.flush(i);
            }
        }
        self.reap();
    }

    /// Requests are waiting behind an answer that came (serve them without waiting to
    /// poll: their bytes were read already).
    pub fn has_backlog(&self) -> bool {
        self.conns.iter().any(|c| c.backlog)
    }

    fn accept(&mut self) {
        while let Ok((sock, _)) = self.listener.accept() {
            let _ = sock.set_nonblocking(true);
            let mut c = Conn {
                sock,
                inbuf: Vec::new(),
                out: Vec::new(),
                sent: 0,
                last_active: Instant::now(),
                watch: None,
                close_after_write: false,
                deferred: None,
                raw_stream: false,
                backlog: false,
                attach_input: false,
                input_eof: false,
            };
            if !self.peer_allowed(&c.sock) {
                c.queue_error(&Error::Forbidden(
                    "peer is neither root nor podinit's user".into(),
                ));
            } else if self.conns.len() >= MAX_CONNECTIONS {
                c.queue_error(&Error::Unavailable("too many connections".into()));
            }
            let i = self.conns.len();
            self.conns.push(c);
            self.flush(i);
        }
    }

    fn peer_allowed(&self, s: &UnixStream) -> bool {
        use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
        match getsockopt(s, PeerCredentials) {
            Ok(cred) => cred.uid() == 0 || cred.uid() == self.uid,
            Err(_) => false,
        }
    }

    /// Read what the client sent; false when it is not to be answered (it is being closed,
    /// or its socket failed).
    fn read(&mut self, i: usize) -> bool {
        let c = &mut self.conns[i];
        if c.close_after_write {
            return false;
        }
        let mut buf = [0u8; 16 << 10];
        if c.attach_input || c.input_eof {
            while c.attach_input && !c.input_eof && c.inbuf.len() < MAX_ATTACH_INPUT {
                match c.sock.read(&mut buf) {
                    Ok(0) => c.input_eof = true,
                    Ok(n) => c.inbuf.extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(_) => c.input_eof = true,
                }
            }
            return false;
        }
        loop {
            match c.sock.read(&mut buf) {
                Ok(0) => {
                    // The client is done sending; answer what it sent, then close.
                    c.close_after_write = true;
                    break;
                }
                Ok(n) => {
                    c.last_active = Instant::now();
                    if c.watch.is_some() {
                        continue; // a watcher has nothing more to say; ignore
                    }
                    c.inbuf.extend_from_slice(&buf[..n]);
                    if c.inbuf.len() > http::MAX_HEAD + http::MAX_BODY {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    c.close_after_write = true;
                    c.out.clear();
                    c.sent = 0;
                    return false;
                }
            }
        }
        true
    }

    /// Answer every complete request (pipelining), in order, until one is deferred.
    fn answer(&mut self, i: usize, handler: &mut dyn FnMut(&Request) -> Reply) {
        let c = &mut self.conns[i];
        c.backlog = false;
        while c.watch.is_none() && c.deferred.is_none() && !c.inbuf.is_empty() {
            match http::parse(&c.inbuf) {
                Ok(None) => break,
                Ok(Some((req, used))) => {
                    c.inbuf.drain(..used);
                    match handler(&req) {
                        Reply::Full {
                            code,
                            content_type,
                            body,
                        } => {
                            let mut r = http::response(code, content_type, &body, req.close);
                            // HEAD: the head a GET would have, without its body.
                            if req.method == "HEAD" {
                                r.truncate(r.len() - body.len());
                            }
                            c.out.extend(r);
                            if req.close {
                                c.close_after_write = true;
                                break;
                            }
                        }
                        Reply::Watch {
                            stream,
                            content_type,
                            initial,
                        } => {
                            c.raw_stream = req.http10;
                            c.out.extend(http::stream_head(content_type, !c.raw_stream));
                            for line in initial {
                                c.out.extend(c.frame(&line));
                            }
                            c.watch = Some(stream);
                        }
                        Reply::Deferred(token) => c.deferred = Some((token, req.close)),
                        Reply::Attach { container, stdin } => {
                            // The rest of the connection is the session's: raw both ways.
                            c.raw_stream = true;
                            c.out
                                .extend(http::stream_head("application/octet-stream", false));
                            c.watch = Some(Stream::Attach(container));
                            c.attach_input = stdin;
                            if !stdin {
                                c.inbuf.clear();
                            }
                            break;
                        }
                    }
                }
                Err(e) => {
                    c.queue_error(&Error::from(e));
                    c.inbuf.clear();
                    break;
                }
            }
        }
    }

    fn flush(&mut self, i: usize) {
        let c = &mut self.conns[i];
        while c.sent < c.out.len() {
            match c.sock.write(&c.out[c.sent..]) {
                Ok(0) => break,
                Ok(n) => {
                    c.sent += n;
                    c.last_active = Instant::now();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    // The peer is gone: nothing more can be written.
                    c.close_after_write = true;
                    c.sent = c.out.len();
                }
            }
        }
        if c.sent == c.out.len() {
            c.out.clear();
            c.sent = 0;
        }
    }

    /// Send a line to every watcher of `stream`; a watcher that cannot keep up is dropped.
    pub fn broadcast(&mut self, stream: &Stream, line: &[u8]) {
        if !self.conns.iter().any(|c| c.watch.as_ref() == Some(stream)) {
            return;
        }
        for i in 0..self.conns.len() {
            let c = &mut self.conns[i];
            if c.watch.as_ref() != Some(stream) || c.close_after_write {
                continue;
            }
            let frame = c.frame(line);
            if c.out.len() - c.sent + frame.len() > MAX_QUEUED {
                c.close_after_write = true;
                c.out.clear();
                c.sent = 0;
                continue;
            }
            c.out.extend_from_slice(&frame);
            self.flush(i);
        }
        self.reap();
    }

    /// End every watch stream of `stream` cleanly (the terminating chunk).
    pub fn end_streams(&mut self, stream: &Stream) {
        for i in 0..self.conns.len() {
            let c = &mut self.conns[i];
            if c.watch.as_ref() == Some(stream) {
                c.out.extend(c.frame(b""));
                c.watch = None;
                c.close_after_write = true;
                self.flush(i);
            }
        }
        self.reap();
    }

    /// Drop finished and idle connections.
    fn reap(&mut self) {
        let now = Instant::now();
        self.conns.retain(|c| {
            let done = c.close_after_write && c.sent >= c.out.len() && c.deferred.is_none();
            let idle =
                c.watch.is_none() && c.deferred.is_none() && now >= c.last_active + IDLE_TIMEOUT;
            !(done || idle)
        });
    }

    /// Send the answer of a [`Reply::Deferred`] (a no-op if its client has gone).
    pub fn complete(&mut self, token: u64, code: u16, content_type: &str, body: &[u8]) {
        let Some(i) = self
            .conns
            .iter()
            .position(|c| c.deferred.is_some_and(|(t, _)| t == token))
        else {
            return;
        };
        let c = &mut self.conns[i];
        let close = c.deferred.take().is_some_and(|(_, close)| close);
        c.out
            .extend(http::response(code, content_type, body, close));
        c.close_after_write |= close;
        c.backlog = !close && !c.inbuf.is_empty();
        c.last_active = Instant::now();
        self.flush(i);
        self.reap();
    }

    /// Hand each attach session's input to `take(container, bytes, eof)`, which returns how
    /// many bytes the container took; `eof` (the client's input ended and all of it was
    /// taken) is told once. Returns the containers that still have input waiting.
    pub fn attach_input(
        &mut self,
        take: &mut dyn FnMut(&str, &[u8], bool) -> usize,
    ) -> Vec<String> {
        let mut waiting = Vec::new();
        for c in &mut self.conns {
            let Some(Stream::Attach(name)) = &c.watch else {
                continue;
            };
            if !c.attach_input || (c.inbuf.is_empty() && !c.input_eof) {
                continue;
            }
            let eof = c.input_eof;
            let n = take(name, &c.inbuf, false).min(c.inbuf.len());
            c.inbuf.drain(..n);
            if !c.inbuf.is_empty() {
                waiting.push(name.clone());
            } else if eof {
                c.attach_input = false;
                take(name, &[], true);
            }
        }
        waiting
    }

    /// Whether any client is attached to a container (its output is then copied to it).
    pub fn has_attach_sessions(&self) -> bool {
        self.conns
            .iter()
            .any(|c| matches!(c.watch, Some(Stream::Attach(_))))
    }

    /// End the attach sessions whose input has ended (the container's stdin stays open).
    pub fn end_finished_attach(&mut self, container: &str) {
        for i in 0..self.conns.len() {
            let c = &mut self.conns[i];
            if c.watch.as_ref() == Some(&Stream::Attach(container.to_string()))
                && c.input_eof
                && !c.attach_input
            {
                c.watch = None;
                c.close_after_write = true;
                self.flush(i);
            }
        }
        self.reap();
    }

    /// Drop clients idle past the timeout (call when `next_deadline` passes).
    pub fn expire(&mut self) {
        self.reap();
    }

    pub fn connections(&self) -> usize {
        self.conns.len()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Conn {
    /// One piece of a stream as this client takes it (a chunk, or raw bytes for HTTP/1.0;
    /// the empty piece ends the stream).
    fn frame(&self, data: &[u8]) -> Vec<u8> {
        if self.raw_stream {
            data.to_vec()
        } else {
            http::chunk(data)
        }
    }

    fn queue_error(&mut self, e: &Error) {
        let code = e.status().0;
        self.out
            .extend(http::response(code, "application/json", &e.body(), true));
        self.close_after_write = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp_sock() -> PathBuf {
        std::env::temp_dir().join(format!("podinit-api-{}.sock", crate::util::random_hex(4)))
    }

    /// Drive the server until `done` says so (bounded).
    fn pump(s: &mut Server, h: &mut dyn FnMut(&Request) -> Reply, rounds: usize) {
        for _ in 0..rounds {
            let slots: Vec<Slot> = s.poll_set().iter().map(|(_, _, sl)| *sl).collect();
            s.service(&slots, h);
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    fn ok_handler(req: &Request) -> Reply {
        Reply::Full {
            code: 200,
            content_type: "text/plain",
            body: format!("{} {}", req.method, req.path).into_bytes(),
        }
    }

    #[test]
    fn serves_requests_and_sets_mode_0600() {
        let p = tmp_sock();
        let mut s = Server::bind(&p).unwrap();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let mut c = UnixStream::connect(&p).unwrap();
        c.write_all(b"GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n")
            .unwrap();
        pump(&mut s, &mut ok_handler, 5);
        let mut out = String::new();
        c.read_to_string(&mut out).unwrap();
        assert!(out.starts_with("HTTP/1.1 200 OK"), "{out}");
        assert!(out.ends_with("GET /healthz"), "{out}");
        assert_eq!(s.connections(), 0);
        drop(s);
        assert!(!p.exists(), "socket removed");
    }

    #[test]
    fn deferred_answers_wait_for_complete_even_after_a_half_close() {
        let p = tmp_sock();
        let mut s = Server::bind(&p).unwrap();
        let mut c = UnixStream::connect(&p).unwrap();
        c.write_all(b"POST /v1/containers/c/exec HTTP/1.1\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}")
            .unwrap();
        c.shutdown(std::net::Shutdown::Write).unwrap();
        pump(&mut s, &mut |_| Reply::Deferred(7), 5);
        assert_eq!(s.connections(), 1, "kept while its answer is pending");
        assert!(s.next_deadline().is_none(), "not timed out as idle");
        // The half-closed client is out of the poll set: it would spin on EOF.
        assert_eq!(s.poll_set().len(), 1);
        s.complete(7, 200, "application/json", b"{\"exitCode\":0}");
        let mut out = String::new();
        c.read_to_string(&mut out).unwrap();
        assert!(out.starts_with("HTTP/1.1 200"), "{out}");
        assert!(out.ends_with("{\"exitCode\":0}"), "{out}");
        assert_eq!(s.connections(), 0);
        s.complete(7, 200, "text/plain", b"late");
    }

    #[test]
    fn oversized_bodies_are_refused_with_a_status() {
        let p = tmp_sock();
        let mut s = Server::bind(&p).unwrap();
        let mut c = UnixStream::connect(&p).unwrap();
        let req = format!(
            "POST /v1/pod/terminate HTTP/1.1\r\nContent-Length: {}\r\n\r\n",
            http::MAX_BODY + 1
        );
        c.write_all(req.as_bytes()).unwrap();
        pump(&mut s, &mut ok_handler, 5);
        let mut out = String::new();
        c.read_to_string(&mut out).unwrap();
        assert!(out.starts_with("HTTP/1.1 413"), "{out}");
        assert!(out.contains("\"kind\":\"Status\""), "{out}");
    }

    #[test]
    fn slow_watchers_are_dropped_not_waited_for() {
        let p = tmp_sock();
        let mut s = Server::bind(&p).unwrap();
        let mut c = UnixStream::connect(&p).unwrap();
        c.write_all(b"GET /v1/pod?watch=true HTTP/1.1\r\n\r\n")
            .unwrap();
        let mut h = |_: &Request| Reply::Watch {
            stream: Stream::Pod,
            content_type: "application/json",
            initial: vec![b"{}".to_vec()],
        };
        pump(&mut s, &mut h, 3);
        assert_eq!(s.connections(), 1);
        // The client never reads: after MAX_QUEUED plus the socket buffer it is dropped.
        let line = vec![b'x'; 64 << 10];
        let t0 = Instant::now();
        for _ in 0..200 {
            s.broadcast(&Stream::Pod, &line);
        }
        assert!(
            t0.elapsed() < Duration::from_secs(2),
            "broadcast never blocks"
        );
        assert_eq!(s.connections(), 0, "the slow watcher was dropped");
    }

    #[test]
    fn attach_sessions_hand_input_over_and_stream_output_raw() {
        let p = tmp_sock();
        let mut s = Server::bind(&p).unwrap();
        let mut c = UnixStream::connect(&p).unwrap();
        c.write_all(
            b"POST /v1/containers/c/attach?stdin=true HTTP/1.1\r\nContent-Length: 0\r\n\r\nhello",
        )
        .unwrap();
        let mut h = |_: &Request| Reply::Attach {
            container: "c".into(),
            stdin: true,
        };
        pump(&mut s, &mut h, 3);
        let mut got = Vec::new();
        let waiting = s.attach_input(&mut |name, data, eof| {
            assert_eq!(name, "c");
            if !eof {
                got.extend_from_slice(data);
            }
            data.len()
        });
        assert!(waiting.is_empty());
        assert_eq!(got, b"hello");
        // Input the container has no room for waits, and is said to.
        c.write_all(b"more").unwrap();
        pump(&mut s, &mut h, 3);
        assert_eq!(s.attach_input(&mut |_, _, _| 0), vec!["c".to_string()]);
        s.broadcast(&Stream::Attach("c".into()), b"out\r\n");
        // The client's half-close ends its input, told once; the session stays.
        c.shutdown(std::net::Shutdown::Write).unwrap();
        pump(&mut s, &mut h, 3);
        let mut eofs = 0;
        for _ in 0..2 {
            s.attach_input(&mut |_, data, eof| {
                eofs += eof as i32;
                data.len()
            });
        }
        assert_eq!(eofs, 1);
        assert_eq!(s.connections(), 1);
        s.end_streams(&Stream::Attach("c".into()));
        let mut out = String::new();
        c.read_to_string(&mut out).unwrap();
        assert!(out.starts_with("HTTP/1.1 200 OK"), "{out}");
        assert!(out.ends_with("\r\n\r\nout\r\n"), "{out:?}");
        assert_eq!(s.connections(), 0);
    }
}
