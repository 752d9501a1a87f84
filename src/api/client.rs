//! The client side of the status socket, for podinit's own commands: one blocking
//! HTTP/1.1 request per connection, with plain or chunked (streamed) responses.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `--socket`, else `$PODINIT_SOCKET`.
pub fn socket_path(opt: Option<&Path>) -> Option<PathBuf> {
    opt.map(Path::to_path_buf)
        .or_else(|| std::env::var_os("PODINIT_SOCKET").map(PathBuf::from))
}

pub struct Response {
    pub code: u16,
    pub body: Vec<u8>,
}

impl Response {
    /// The `message` of a Kubernetes Status body, else the body as text.
    pub fn error_message(&self) -> String {
        serde_json::from_slice::<serde_json::Value>(&self.body)
            .ok()
            .and_then(|v| v["message"].as_str().map(str::to_string))
            .unwrap_or_else(|| String::from_utf8_lossy(&self.body).trim().to_string())
    }
}

fn connect(sock: &Path, timeout: Option<Duration>) -> io::Result<UnixStream> {
    let s = crate::sys::unix_socket::socket_path(sock)
        .and_then(|(_dir, addr)| UnixStream::connect(addr))
        .map_err(|e| {
            let hint = match e.kind() {
                io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused => {
                    " (is the pod running? give --socket or $PODINIT_SOCKET)"
                }
                _ => "",
            };
            io::Error::new(
                e.kind(),
                format!("connecting to {}: {e}{hint}", sock.display()),
            )
        })?;
    s.set_read_timeout(timeout)?;
    s.set_write_timeout(Some(Duration::from_secs(10)))?;
    Ok(s)
}

fn send(s: &mut UnixStream, method: &str, path: &str, body: Option<&[u8]>) -> io::Result<()> {
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: pod\r\nConnection: close\r\n");
    if let Some(b) = body {
        req.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            b.len()
        ));
    }
    req.push_str("\r\n");
    let sent = s.write_all(req.as_bytes()).and_then(|()| match body {
        Some(b) => s.write_all(b),
        None => Ok(()),
    });
    match sent {
        // The server answers some connections as soon as it accepts them (403 to a peer it
        // refuses, 503 when it is full) and closes without reading: its answer is waiting
        // to be read, and says more than the broken pipe.
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
            ) =>
        {
            Ok(())
        }
        other => other,
    }
}

/// Status line and headers: (code, chunked?, content-length).
fn read_head(r: &mut impl BufRead) -> io::Result<(u16, bool, Option<usize>)> {
    let mut line = String::new();
    r.read_line(&mut line)?;
    let code = line
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| io::Error::other(format!("bad response from the pod: {line:?}")))?;
    let (mut chunked, mut len) = (false, None);
    loop {
        line.clear();
        if r.read_line(&mut line)? == 0 || line == "\r\n" {
            break;
        }
        let (k, v) = line.split_once(':').unwrap_or((&line, ""));
        if k.eq_ignore_ascii_case("transfer-encoding") && v.trim() == "chunked" {
            chunked = true;
        } else if k.eq_ignore_ascii_case("content-length") {
            len = v.trim().parse().ok();
        }
    }
    Ok((code, chunked, len))
}

/// Read chunks, calling `on_data` with each; returns when the stream ends.
fn read_chunks(r: &mut impl BufRead, on_data: &mut dyn FnMut(&[u8])) -> io::Result<()> {
    let mut line = String::new();
    loop {
        line.clear();
        if r.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let n = usize::from_str_radix(line.trim(), 16)
            .map_err(|_| io::Error::other(format!("bad chunk size {line:?}")))?;
        if n == 0 {
            return Ok(());
        }
        let mut buf = vec![0u8; n + 2];
        r.read_exact(&mut buf)?;
        on_data(&buf[..n]);
    }
}

/// One request; the whole response.
pub fn request(
    sock: &Path,
    method: &str,
    path: &str,
    body: Option<&[u8]>,
    timeout: Duration,
) -> io::Result<Response> {
    let mut s = connect(sock, Some(timeout))?;
    send(&mut s, method, path, body)?;
    let mut r = BufReader::new(s);
    let (code, chunked, len) = read_head(&mut r)?;
    let mut body = Vec::new();
    if chunked {
        read_chunks(&mut r, &mut |d| body.extend_from_slice(d))?;
    } else if let Some(n) = len {
        body.resize(n, 0);
        r.read_exact(&mut body)?;
    } else {
        r.read_to_end(&mut body)?;
    }
    Ok(Response { code, body })
}

/// A streamed GET: `on_data` gets each chunk until the server ends the stream. A non-200
/// answer is returned whole instead.
pub fn stream(sock: &Path, path: &str, on_data: &mut dyn FnMut(&[u8])) -> io::Result<Response> {
    let mut s = connect(sock, None)?;
    send(&mut s, "GET", path, None)?;
    let mut r = BufReader::new(s);
    let (code, chunked, len) = read_head(&mut r)?;
    if code == 200 && chunked {
        read_chunks(&mut r, on_data)?;
        return Ok(Response {
            code,
            body: Vec::new(),
        });
    }
    let mut body = vec![0u8; len.unwrap_or(0)];
    r.read_exact(&mut body)?;
    Ok(Response { code, body })
}

/// Open an attach session (`POST path`): on 200, the connection, its reader holding any
/// output already read; the client writes the container's input to `get_ref()`. A non-200
/// answer is returned whole instead.
pub fn attach(sock: &Path, path: &str) -> io::Result<Result<BufReader<UnixStream>, Response>> {
    let mut s = connect(sock, None)?;
    send(&mut s, "POST", path, Some(b"".as_slice()))?;
    let mut r = BufReader::new(s);
    let (code, _, len) = read_head(&mut r)?;
    if code == 200 {
        return Ok(Ok(r));
    }
    let mut body = vec![0u8; len.unwrap_or(0)];
    r.read_exact(&mut body)?;
    Ok(Err(Response { code, body }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    #[test]
    fn an_answer_sent_before_the_request_was_read_is_still_read() {
        let dir =
            std::env::temp_dir().join(format!("podinit-client-{}", crate::util::random_hex(4)));
        std::fs::create_dir_all(&dir).unwrap();
        let sock = dir.join("s");
        let l = UnixListener::bind(&sock).unwrap();
        let server = std::thread::spawn(move || {
            let (mut c, _) = l.accept().unwrap();
            c.write_all(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 2\r\n\r\nno")
                .unwrap();
            // Closed without reading the request.
        });
        // More than the socket buffers hold: the write is still going on when the server
        // closes, and fails with EPIPE.
        let body = vec![b'x'; 4 << 20];
        let r = request(&sock, "POST", "/x", Some(&body), Duration::from_secs(10)).unwrap();
        server.join().unwrap();
        assert_eq!((r.code, r.body.as_slice()), (403, &b"no"[..]));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
