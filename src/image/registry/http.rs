//! An HTTP/1.1 exchange just big enough for registries: one request per connection
//! (`Connection: close`), the answer's head parsed by `httparse`, its body streamed with
//! Content-Length or chunked framing, and a body shorter or longer than announced an
//! error. Redirects and auth are the caller's (`client.rs`).

use super::conn::{self, Net, Stream};
use super::url::Url;
use crate::image::{Error, Step};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::time::Duration;

/// A response's head may not be larger than this.
const MAX_HEAD: usize = 64 * 1024;

pub struct Response {
    pub status: u16,
    pub reason: String,
    headers: Vec<(String, String)>,
    /// Who answered (for messages).
    pub url: Url,
    body: Body,
}

impl Response {
    /// The first header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn headers<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.headers
            .iter()
            .filter(move |(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The announced body length (Content-Length), if any.
    pub fn content_length(&self) -> Option<u64> {
        match self.body.framing {
            Framing::Length(n) => Some(n),
            _ => None,
        }
    }

    pub fn body(&mut self) -> &mut Body {
        &mut self.body
    }

    /// Reads the whole body (up to `limit` bytes) into memory, where it is read again.
    pub fn buffer_body(&mut self, limit: u64) -> Result<Vec<u8>, Error> {
        let b = self.read_body(limit)?;
        self.body.buffered = Some(io::Cursor::new(b.clone()));
        Ok(b)
    }

    /// The whole body, refusing more than `limit` bytes.
    pub fn read_body(&mut self, limit: u64) -> Result<Vec<u8>, Error> {
        let bad = |why: String| Error::Exchange {
            url: self.url.to_string(),
            step: Step::Body,
            why,
        };
        let mut out = Vec::new();
        (&mut self.body)
            .take(limit + 1)
            .read_to_end(&mut out)
            .map_err(|e| bad(e.to_string()))?;
        if out.len() as u64 > limit {
            return Err(bad(format!("answer larger than {limit} bytes")));
        }
        Ok(out)
    }
}

/// Why an exchange failed; `not_http` when the server did not answer in HTTP (it closed
/// at once or sent something else, as a TLS server does to a plain request).
#[derive(Debug)]
pub struct SendError {
    pub msg: String,
    pub not_http: bool,
}

/// A connection that could not be made: its one line.
impl From<crate::image::Error> for SendError {
    fn from(e: crate::image::Error) -> Self {
        SendError {
            msg: e.to_string(),
            not_http: false,
        }
    }
}

impl From<String> for SendError {
    fn from(msg: String) -> Self {
        SendError {
            msg,
            not_http: false,
        }
    }
}

/// Sends one request and reads the answer's head; the body is read from the response.
pub fn send(
    method: &str,
    url: &Url,
    headers: &[(&str, String)],
    net: &Net,
) -> Result<Response, SendError> {
    let timeout = net.timeout;
    let conn = conn::connect(url, net)?;
    let mut stream = conn.stream;
    // Through a proxy, plain HTTP names the whole URL.
    let target = match conn.forward {
        Some(_) => url.to_string(),
        None => url.target.clone(),
    };
    let mut req = format!(
        "{method} {target} HTTP/1.1\r\nHost: {}\r\nUser-Agent: podinit/{}\r\nConnection: close\r\n",
        url.authority(),
        env!("CARGO_PKG_VERSION")
    );
    if let Some(Some(a)) = &conn.forward {
        req.push_str(&format!("Proxy-Authorization: {a}\r\n"));
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    let io_err = |e: io::Error| SendError::from(describe(url, timeout, &e));
    stream.write_all(req.as_bytes()).map_err(io_err)?;
    stream.flush().map_err(io_err)?;
    let mut r = BufReader::with_capacity(64 * 1024, stream);
    let head = read_head(&mut r).map_err(|e| SendError {
        not_http: e.kind() == io::ErrorKind::UnexpectedEof,
        msg: describe(url, timeout, &e),
    })?;
    let mut parsed = [httparse::EMPTY_HEADER; 96];
    let mut resp = httparse::Response::new(&mut parsed);
    match resp.parse(&head) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => unreachable!("the head ends with an empty line"),
        Err(e) => {
            return Err(SendError {
                msg: format!("{url}: malformed HTTP answer: {e}"),
                not_http: true,
            })
        }
    }
    let status = resp.code.unwrap_or(0);
    let reason = resp.reason.unwrap_or("").to_string();
    let headers: Vec<(String, String)> = resp
        .headers
        .iter()
        .map(|h| {
            let v = String::from_utf8_lossy(h.value).trim().to_string();
            (h.name.to_string(), v)
        })
        .collect();
    let framing = framing(url, method, status, &headers)?;
    Ok(Response {
        status,
        reason,
        headers,
        url: url.clone(),
        body: Body {
            r,
            framing,
            done: 0,
            chunk_left: None,
            finished: false,
            buffered: None,
            url: url.clone(),
            timeout,
        },
    })
}

/// What a failed read or write means: a timeout says how long nothing came.
fn describe(url: &Url, timeout: Duration, e: &io::Error) -> String {
    if conn::is_timeout(e) {
        format!(
            "{}: no answer for {timeout:?} (the registry hangs)",
            url.authority()
        )
    } else {
        format!("{}: {e}", url.authority())
    }
}

fn read_head(r: &mut BufReader<Stream>) -> io::Result<Vec<u8>> {
    let mut head = Vec::new();
    loop {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            let what = if head.is_empty() {
                "closed the connection without answering"
            } else {
                "closed the connection in the middle of its answer"
            };
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, what));
        }
        let n = buf.len();
        let from = head.len().saturating_sub(3);
        head.extend_from_slice(buf);
        if let Some(p) = head[from..].windows(4).position(|w| w == b"\r\n\r\n") {
            let end = from + p + 4;
            r.consume(n - (head.len() - end));
            head.truncate(end);
            return Ok(head);
        }
        r.consume(n);
        if head.len() > MAX_HEAD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("answer's head larger than {MAX_HEAD} bytes"),
            ));
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Framing {
    Empty,
    Length(u64),
    Chunked,
    UntilClose,
}

/// How the body of `url`'s answer is framed.
fn framing(
    url: &Url,
    method: &str,
    status: u16,
    headers: &[(String, String)],
) -> Result<Framing, SendError> {
    let bad = |why: String| SendError::from(format!("{url}: {why}"));
    if method == "HEAD" || status == 204 || status == 304 || (100..200).contains(&status) {
        return Ok(Framing::Empty);
    }
    let get = |name: &'static str| {
        headers
            .iter()
            .filter(move |(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    };
    if let Some(te) = get("transfer-encoding").next_back() {
        let last = te.rsplit(',').next().unwrap_or("").trim();
        if last.eq_ignore_ascii_case("chunked") {
            return Ok(Framing::Chunked);
        }
        return Err(bad(format!("unsupported Transfer-Encoding {te:?}")));
    }
    let mut length = None;
    for v in get("content-length") {
        let n = v
            .parse::<u64>()
            .map_err(|_| bad(format!("invalid Content-Length {v:?}")))?;
        if length.is_some_and(|l| l != n) {
            return Err(bad("conflicting Content-Length headers".into()));
        }
        length = Some(n);
    }
    Ok(length.map_or(Framing::UntilClose, Framing::Length))
}

/// A response body, streamed; it fails rather than ends early.
pub struct Body {
    r: BufReader<Stream>,
    framing: Framing,
    /// Bytes of the body read so far.
    done: u64,
    /// In a chunked body: what is left of the current chunk (`None` between chunks).
    chunk_left: Option<u64>,
    finished: bool,
    /// The body already read by `Response::buffer_body`.
    buffered: Option<io::Cursor<Vec<u8>>>,
    url: Url,
    timeout: Duration,
}

impl Body {
    fn err(&self, kind: io::ErrorKind, what: String) -> io::Error {
        io::Error::new(kind, format!("{}: {what}", self.url.authority()))
    }

    fn wrap(&self, e: io::Error) -> io::Error {
        io::Error::new(e.kind(), describe(&self.url, self.timeout, &e))
    }

    fn read_length(&mut self, len: u64, buf: &mut [u8]) -> io::Result<usize> {
        let left = len - self.done;
        if left == 0 {
            // What is already buffered beyond the announced end is a lie about the size.
            if !self.r.buffer().is_empty() {
                return Err(self.err(
                    io::ErrorKind::InvalidData,
                    format!("body longer than the {len} bytes announced"),
                ));
            }
            self.finished = true;
            return Ok(0);
        }
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let n = self.r.read(&mut buf[..want]).map_err(|e| self.wrap(e))?;
        if n == 0 {
            return Err(self.err(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "connection closed after {} of the {len} bytes announced",
                    self.done
                ),
            ));
        }
        self.done += n as u64;
        Ok(n)
    }

    fn read_chunked(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.chunk_left {
                Some(0) => {
                    let line = self.line()?;
                    if !line.is_empty() {
                        return Err(self.err(
                            io::ErrorKind::InvalidData,
                            "chunk longer than its size".into(),
                        ));
                    }
                    self.chunk_left = None;
                }
                Some(left) => {
                    let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
                    let n = self.r.read(&mut buf[..want]).map_err(|e| self.wrap(e))?;
                    if n == 0 {
                        return Err(self.err(
                            io::ErrorKind::UnexpectedEof,
                            format!("connection closed inside a chunk after {} bytes", self.done),
                        ));
                    }
                    self.chunk_left = Some(left - n as u64);
                    self.done += n as u64;
                    return Ok(n);
                }
                None => {
                    let line = self.line()?;
                    let size = line.split(';').next().unwrap_or("").trim();
                    let size = u64::from_str_radix(size, 16).map_err(|_| {
                        self.err(
                            io::ErrorKind::InvalidData,
                            format!("invalid chunk size {line:?}"),
                        )
                    })?;
                    if size == 0 {
                        // Trailers, up to the empty line.
                        while !self.line()?.is_empty() {}
                        self.finished = true;
                        return Ok(0);
                    }
                    self.chunk_left = Some(size);
                }
            }
        }
    }

    /// One CRLF-ended line of chunk framing, without its end.
    fn line(&mut self) -> io::Result<String> {
        let mut line = Vec::new();
        let n = (&mut self.r)
            .take(4096)
            .read_until(b'\n', &mut line)
            .map_err(|e| self.wrap(e))?;
        if n == 0 || !line.ends_with(b"\n") {
            return Err(self.err(
                io::ErrorKind::UnexpectedEof,
                format!("chunked body cut off after {} bytes", self.done),
            ));
        }
        let s = String::from_utf8_lossy(&line);
        Ok(s.trim_end_matches(['\r', '\n']).to_string())
    }
}

impl Read for Body {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some(b) = &mut self.buffered {
            return b.read(buf);
        }
        if self.finished || buf.is_empty() {
            return Ok(0);
        }
        match self.framing {
            Framing::Empty => Ok(0),
            Framing::Length(len) => self.read_length(len, buf),
            Framing::Chunked => self.read_chunked(buf),
            Framing::UntilClose => {
                let n = self.r.read(buf).map_err(|e| self.wrap(e))?;
                self.done += n as u64;
                Ok(n)
            }
        }
    }
}

#[cfg(test)]
#[path = "http_tests.rs"]
mod tests;
