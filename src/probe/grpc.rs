//! The gRPC health check (`grpc.health.v1.Health/Check`, plaintext), as kubelet's gRPC
//! probe makes it. HTTP/2 is the `h2` crate's; its futures are driven right here, inside
//! the supervisor's event loop, with a no-op waker: the socket is non-blocking, `poll`
//! says when it is ready, and [`Call::advance`] polls the connection and the call again.
//! No async runtime, no thread. The gRPC framing and the two protobuf messages (one field
//! each) are encoded by hand.

use super::Outcome;

/// The request message: `HealthCheckRequest{service}` in a gRPC frame.
pub fn request_message(service: &str) -> Vec<u8> {
    let mut msg = Vec::new();
    if !service.is_empty() {
        msg.push(0x0a); // field 1, length-delimited
        varint(&mut msg, service.len() as u64);
        msg.extend_from_slice(service.as_bytes());
    }
    let mut frame = vec![0];
    frame.extend_from_slice(&(msg.len() as u32).to_be_bytes());
    frame.extend_from_slice(&msg);
    frame
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// The `status` (field 1, varint) of a `HealthCheckResponse`; absent means UNKNOWN.
pub fn decode_status(mut b: &[u8]) -> Option<u64> {
    fn read_varint(b: &mut &[u8]) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let (&x, rest) = b.split_first()?;
            *b = rest;
            v |= ((x & 0x7f) as u64) << shift;
            if x & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }
    let mut status = 0;
    while let Some((&tag, rest)) = b.split_first() {
        b = rest;
        match tag & 7 {
            0 => {
                let v = read_varint(&mut b)?;
                if tag >> 3 == 1 {
                    status = v;
                }
            }
            2 => {
                let n = read_varint(&mut b)?;
                b = b.get(n as usize..)?;
            }
            5 => b = b.get(4..)?,
            1 => b = b.get(8..)?,
            _ => return None,
        }
    }
    Some(status)
}

/// `ServingStatus` names, as grpc-go prints them.
pub fn status_name(v: u64) -> String {
    match v {
        0 => "UNKNOWN".into(),
        1 => "SERVING".into(),
        2 => "NOT_SERVING".into(),
        3 => "SERVICE_UNKNOWN".into(),
        v => v.to_string(),
    }
}

/// gRPC status code names (grpc-go's `codes.Code.String`).
pub fn code_name(code: u32) -> String {
    const NAMES: [&str; 17] = [
        "OK",
        "Canceled",
        "Unknown",
        "InvalidArgument",
        "DeadlineExceeded",
        "NotFound",
        "AlreadyExists",
        "PermissionDenied",
        "ResourceExhausted",
        "FailedPrecondition",
        "Aborted",
        "OutOfRange",
        "Unimplemented",
        "Internal",
        "Unavailable",
        "DataLoss",
        "Unauthenticated",
    ];
    NAMES
        .get(code as usize)
        .map(|s| s.to_string())
        .unwrap_or_else(|| format!("Code({code})"))
}

/// `grpc-message` is percent-encoded.
#[cfg_attr(not(feature = "grpc"), allow(dead_code))]
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// What a finished call means, in kubelet's words: the response message (if any) and
/// the gRPC status from the headers or trailers.
pub fn judge(message: Option<&[u8]>, grpc_status: Option<(u32, String)>) -> Outcome {
    match grpc_status {
        Some((0, _)) | None if message.is_some() => {
            match decode_status(message.unwrap_or_default()) {
                Some(1) => Outcome::ok("service is healthy".into()),
                Some(s) => Outcome::fail(format!(
                    "service unhealthy (responded with {:?})",
                    status_name(s)
                )),
                None => Outcome::fail(
                    "error: health rpc probe failed: malformed HealthCheckResponse".into(),
                ),
            }
        }
        Some((12, msg)) => Outcome::fail(format!(
            "this server doesn't implement the grpc health protocol (grpc.health.v1.Health): {msg}"
        )),
        Some((code, msg)) => Outcome::fail(format!(
            "error: health rpc probe failed: rpc error: code = {} desc = {msg}",
            code_name(code)
        )),
        None => Outcome::fail(
            "error: health rpc probe failed: the call ended without a response".into(),
        ),
    }
}

#[cfg(feature = "grpc")]
pub use call::Call;

#[cfg(feature = "grpc")]
mod call {
    use super::*;
    use crate::probe::handler::KUBE_VERSION;
    use bytes::Bytes;
    use std::cell::Cell;
    use std::future::Future;
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::pin::Pin;
    use std::rc::Rc;
    use std::task::{Context, Poll, Waker};
    use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

    /// The socket as h2 sees it: never blocks; `WouldBlock` is `Pending`, and the event
    /// loop polls again when the fd is ready (so no waker is ever needed).
    struct Io {
        sock: TcpStream,
        /// A write could not complete: poll for POLLOUT too.
        blocked_write: Rc<Cell<bool>>,
    }

    impl AsyncRead for Io {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<std::io::Result<()>> {
            match self.sock.read(buf.initialize_unfilled()) {
                Ok(n) => {
                    buf.advance(n);
                    Poll::Ready(Ok(()))
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Poll::Pending,
                Err(e) => Poll::Ready(Err(e)),
            }
        }
    }

    impl AsyncWrite for Io {
        fn poll_write(
            mut self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<std::io::Result<usize>> {
            match self.sock.write(buf) {
                Ok(n) => {
                    self.blocked_write.set(false);
                    Poll::Ready(Ok(n))
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    self.blocked_write.set(true);
                    Poll::Pending
                }
                Err(e) => Poll::Ready(Err(e)),
            }
        }
        fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            let _ = self.sock.shutdown(std::net::Shutdown::Write);
            Poll::Ready(Ok(()))
        }
    }

    type Conn = h2::client::Connection<Io, Bytes>;
    type BoxFut<T> = Pin<Box<dyn Future<Output = T>>>;
    type Handshake = BoxFut<Result<(h2::client::SendRequest<Bytes>, Conn), h2::Error>>;

    /// One health check call on a connected socket.
    pub struct Call {
        blocked_write: Rc<Cell<bool>>,
        handshake: Option<Handshake>,
        conn: Option<Pin<Box<Conn>>>,
        call: Option<BoxFut<Outcome>>,
        authority: String,
        service: String,
    }

    fn h2_err(e: h2::Error) -> Outcome {
        Outcome::fail(format!("error: health rpc probe failed: {e}"))
    }

    impl Call {
        /// Start the HTTP/2 handshake on `sock` (connected, non-blocking).
        pub fn start(sock: TcpStream, authority: String, service: &str) -> Call {
            let blocked_write = Rc::new(Cell::new(false));
            let io = Io {
                sock,
                blocked_write: blocked_write.clone(),
            };
            Call {
                blocked_write,
                handshake: Some(Box::pin(h2::client::handshake(io))),
                conn: None,
                call: None,
                authority,
                service: service.to_string(),
            }
        }

        /// The call is waiting to write (poll for POLLOUT as well as POLLIN).
        pub fn wants_write(&self) -> bool {
            self.blocked_write.get()
        }

        /// Make all the progress possible now.
        pub fn advance(&mut self) -> Option<Outcome> {
            let mut cx = Context::from_waker(Waker::noop());
            if let Some(h) = &mut self.handshake {
                match h.as_mut().poll(&mut cx) {
                    Poll::Pending => return None,
                    Poll::Ready(Err(e)) => return Some(h2_err(e)),
                    Poll::Ready(Ok((send, conn))) => {
                        self.handshake = None;
                        self.conn = Some(Box::pin(conn));
                        self.call = Some(Box::pin(check(
                            send,
                            self.authority.clone(),
                            self.service.clone(),
                        )));
                    }
                }
            }
            // The call queues frames and waits for answers; the connection moves them.
            // Alternate until neither makes progress.
            for _ in 0..64 {
                if let Some(c) = &mut self.call {
                    if let Poll::Ready(o) = c.as_mut().poll(&mut cx) {
                        return Some(o);
                    }
                }
                let Some(conn) = &mut self.conn else {
                    return None;
                };
                match conn.as_mut().poll(&mut cx) {
                    Poll::Pending => {
                        // One more look at the call: the connection may have delivered
                        // what it waits for.
                        if let Some(c) = &mut self.call {
                            if let Poll::Ready(o) = c.as_mut().poll(&mut cx) {
                                return Some(o);
                            }
                        }
                        return None;
                    }
                    Poll::Ready(Err(e)) => return Some(h2_err(e)),
                    Poll::Ready(Ok(())) => self.conn = None,
                }
            }
            None
        }
    }

    async fn check(
        mut send: h2::client::SendRequest<Bytes>,
        authority: String,
        service: String,
    ) -> Outcome {
        let run = async {
            send = send.ready().await?;
            let req = http::Request::builder()
                .method("POST")
                .uri(format!("http://{authority}/grpc.health.v1.Health/Check"))
                .header("content-type", "application/grpc")
                .header("te", "trailers")
                .header("user-agent", format!("kube-probe/{KUBE_VERSION}"))
                .body(())
                .expect("a valid request");
            let (resp, mut stream) = send.send_request(req, false)?;
            stream.send_data(Bytes::from(request_message(&service)), true)?;
            let resp = resp.await?;
            let status_of = |h: &http::HeaderMap| {
                let code = h.get("grpc-status")?.to_str().ok()?.parse::<u32>().ok()?;
                let msg = h
                    .get("grpc-message")
                    .and_then(|m| m.to_str().ok())
                    .map(percent_decode)
                    .unwrap_or_default();
                Some((code, msg))
            };
            if resp.status() != http::StatusCode::OK {
                return Ok::<_, h2::Error>(Outcome::fail(format!(
                    "error: health rpc probe failed: rpc error: code = Unknown desc = unexpected HTTP status code received from server: {}",
                    resp.status().as_u16()
                )));
            }
            // Trailers-only: the status is in the headers.
            if let Some(st) = status_of(resp.headers()) {
                return Ok(judge(None, Some(st)));
            }
            let mut body = resp.into_body();
            let mut message = Vec::new();
            while let Some(chunk) = body.data().await {
                let chunk = chunk?;
                let _ = body.flow_control().release_capacity(chunk.len());
                message.extend_from_slice(&chunk);
                if message.len() > 1 << 16 {
                    break;
                }
            }
            let trailers = body.trailers().await?;
            let st = trailers.as_ref().and_then(status_of);
            let payload = (message.len() >= 5).then(|| {
                let n = u32::from_be_bytes([message[1], message[2], message[3], message[4]]);
                &message[5..message.len().min(5 + n as usize)]
            });
            Ok(judge(payload, st))
        };
        run.await.unwrap_or_else(h2_err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_message_carries_the_service() {
        assert_eq!(request_message(""), vec![0, 0, 0, 0, 0]);
        assert_eq!(
            request_message("svc"),
            vec![0, 0, 0, 0, 5, 0x0a, 3, b's', b'v', b'c']
        );
    }

    #[test]
    fn serving_is_success_and_anything_else_failure() {
        assert_eq!(
            judge(Some(&[0x08, 1]), Some((0, String::new()))),
            Outcome::ok("service is healthy".into())
        );
        let o = judge(Some(&[0x08, 2]), Some((0, String::new())));
        assert!(!o.ok);
        assert_eq!(
            o.output,
            "service unhealthy (responded with \"NOT_SERVING\")"
        );
        // An empty message is UNKNOWN.
        assert!(!judge(Some(&[]), None).ok);
        let o = judge(None, Some((5, "unknown service".into())));
        assert_eq!(
            o.output,
            "error: health rpc probe failed: rpc error: code = NotFound desc = unknown service"
        );
        let o = judge(None, Some((12, "x".into())));
        assert!(o
            .output
            .starts_with("this server doesn't implement the grpc health protocol"));
        assert!(!judge(None, None).ok);
    }

    #[test]
    fn protobuf_and_percent_decoding() {
        assert_eq!(decode_status(&[0x08, 0x01]), Some(1));
        assert_eq!(decode_status(&[0x12, 0x01, b'x', 0x08, 0x02]), Some(2));
        assert_eq!(decode_status(&[0x08]), None);
        assert_eq!(percent_decode("a%20b%"), "a b%");
        assert_eq!(code_name(14), "Unavailable");
    }
}
