//! The gRPC health check (`grpc.health.v1.Health/Check`) over plaintext HTTP/2 with prior
//! knowledge: the one unary call kubelet's gRPC probe makes, spoken directly (frames,
//! HPACK literals, protobuf) so that it runs inside the event loop like every other
//! check. Only what the call needs is implemented: the request is sent in one write,
//! the answer is the `status` field of the first response message; a stream that ends
//! without one (an error status in trailers) fails.

use super::handler::KUBE_VERSION;
use super::Outcome;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const DATA: u8 = 0;
const HEADERS: u8 = 1;
const RST_STREAM: u8 = 3;
const SETTINGS: u8 = 4;
const PING: u8 = 6;
const GOAWAY: u8 = 7;
const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
/// Frames larger than this are not expected from a health service.
const MAX_FRAME: usize = 1 << 16;

fn frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    let n = payload.len() as u32;
    out.extend_from_slice(&n.to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
}

/// An HPACK integer with an `n`-bit prefix (RFC 7541 §5.1).
fn hpack_int(out: &mut Vec<u8>, first: u8, n: u32, mut v: usize) {
    let max = (1usize << n) - 1;
    if v < max {
        out.push(first | v as u8);
        return;
    }
    out.push(first | max as u8);
    v -= max;
    while v >= 128 {
        out.push((v % 128 + 128) as u8);
        v /= 128;
    }
    out.push(v as u8);
}

fn hpack_str(out: &mut Vec<u8>, s: &str) {
    hpack_int(out, 0, 7, s.len());
    out.extend_from_slice(s.as_bytes());
}

/// A header "without indexing" whose name is static-table entry `index` (0: a new name).
fn hpack_header(out: &mut Vec<u8>, index: usize, name: &str, value: &str) {
    hpack_int(out, 0, 4, index);
    if index == 0 {
        hpack_str(out, name);
    }
    hpack_str(out, value);
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Everything the client sends: preface, SETTINGS, the call's HEADERS and its one DATA
/// frame with `HealthCheckRequest{service}`.
pub fn request(service: &str) -> Vec<u8> {
    let mut out = PREFACE.to_vec();
    frame(&mut out, SETTINGS, 0, 0, &[]);
    let mut h = vec![0x83, 0x86]; // :method POST, :scheme http (static table)
    hpack_header(&mut h, 4, ":path", "/grpc.health.v1.Health/Check");
    hpack_header(&mut h, 1, ":authority", "localhost");
    hpack_header(&mut h, 31, "content-type", "application/grpc");
    hpack_header(&mut h, 0, "te", "trailers");
    hpack_header(
        &mut h,
        58,
        "user-agent",
        &format!("kube-probe/{KUBE_VERSION}"),
    );
    frame(&mut out, HEADERS, END_HEADERS, 1, &h);
    let mut msg = Vec::new();
    if !service.is_empty() {
        msg.push(0x0a); // field 1, length-delimited
        varint(&mut msg, service.len() as u64);
        msg.extend_from_slice(service.as_bytes());
    }
    let mut data = vec![0];
    data.extend_from_slice(&(msg.len() as u32).to_be_bytes());
    data.extend_from_slice(&msg);
    frame(&mut out, DATA, END_STREAM, 1, &data);
    out
}

/// The client's view of the connection: how far the server's bytes were read, and the
/// response message collected so far.
#[derive(Default)]
pub struct Session {
    pos: usize,
    message: Vec<u8>,
}

/// `grpc.health.v1.HealthCheckResponse.ServingStatus` names.
fn status_name(v: u64) -> String {
    match v {
        0 => "UNKNOWN".into(),
        1 => "SERVING".into(),
        2 => "NOT_SERVING".into(),
        3 => "SERVICE_UNKNOWN".into(),
        v => v.to_string(),
    }
}

/// The `status` (field 1, varint) of a HealthCheckResponse; absent means UNKNOWN.
fn decode_status(mut b: &[u8]) -> Option<u64> {
    let mut status = 0;
    while let Some((&tag, rest)) = b.split_first() {
        b = rest;
        let mut v = 0u64;
        let read_varint = |b: &mut &[u8], v: &mut u64| -> Option<()> {
            for shift in (0..64).step_by(7) {
                let (&x, rest) = b.split_first()?;
                *b = rest;
                *v |= ((x & 0x7f) as u64) << shift;
                if x & 0x80 == 0 {
                    return Some(());
                }
            }
            None
        };
        match tag & 7 {
            0 => {
                read_varint(&mut b, &mut v)?;
                if tag >> 3 == 1 {
                    status = v;
                }
            }
            2 => {
                read_varint(&mut b, &mut v)?;
                b = b.get(v as usize..)?;
            }
            _ => return None,
        }
    }
    Some(status)
}

impl Session {
    /// Read the frames that arrived (`buf` holds everything so far). Returns bytes to
    /// send back (acknowledgements) and the outcome once known.
    pub fn read(&mut self, buf: &[u8], eof: bool) -> (Vec<u8>, Option<Outcome>) {
        let mut reply = Vec::new();
        while buf.len() >= self.pos + 9 {
            let h = &buf[self.pos..self.pos + 9];
            let len = u32::from_be_bytes([0, h[0], h[1], h[2]]) as usize;
            let (kind, flags) = (h[3], h[4]);
            let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
            if len > MAX_FRAME {
                return (
                    reply,
                    Some(Outcome::fail("health rpc failed: frame too large".into())),
                );
            }
            if buf.len() < self.pos + 9 + len {
                break;
            }
            let payload = &buf[self.pos + 9..self.pos + 9 + len];
            self.pos += 9 + len;
            match kind {
                SETTINGS if flags & ACK == 0 => frame(&mut reply, SETTINGS, ACK, 0, &[]),
                PING if flags & ACK == 0 => frame(&mut reply, PING, ACK, 0, payload),
                GOAWAY => {
                    return (
                        reply,
                        Some(Outcome::fail(
                            "health rpc failed: the server sent GOAWAY".into(),
                        )),
                    )
                }
                RST_STREAM if stream == 1 => {
                    return (
                        reply,
                        Some(Outcome::fail(
                            "health rpc failed: the server reset the stream".into(),
                        )),
                    )
                }
                DATA if stream == 1 => {
                    let mut p = payload;
                    if flags & PADDED != 0 {
                        let Some((&pad, rest)) = p.split_first() else {
                            break;
                        };
                        p = &rest[..rest.len().saturating_sub(pad as usize)];
                    }
                    self.message.extend_from_slice(p);
                    if self.message.len() >= 5 {
                        let n = u32::from_be_bytes([
                            self.message[1],
                            self.message[2],
                            self.message[3],
                            self.message[4],
                        ]) as usize;
                        if self.message.len() >= 5 + n {
                            let o = match decode_status(&self.message[5..5 + n]) {
                                Some(1) => Outcome::ok(String::new()),
                                Some(s) => Outcome::fail(format!(
                                    "service unhealthy (responded with {:?})",
                                    status_name(s)
                                )),
                                None => {
                                    Outcome::fail("health rpc failed: malformed response".into())
                                }
                            };
                            return (reply, Some(o));
                        }
                    }
                }
                HEADERS if stream == 1 && flags & END_STREAM != 0 => {
                    // Trailers without a message: the call failed (e.g. NotFound for an
                    // unknown service, Unimplemented without a health service).
                    return (
                        reply,
                        Some(Outcome::fail(
                            "health rpc failed: the call ended with an error status and no response".into(),
                        )),
                    );
                }
                _ => {}
            }
        }
        let o = eof.then(|| Outcome::fail("health rpc failed: connection closed".into()));
        (reply, o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(status: u8) -> Vec<u8> {
        let mut f = Vec::new();
        frame(&mut f, DATA, 0, 1, &[0, 0, 0, 0, 2, 0x08, status]);
        f
    }

    #[test]
    fn the_request_is_one_unary_call() {
        let r = request("svc");
        assert!(r.starts_with(PREFACE));
        let tail = &r[r.len() - 19..];
        // DATA frame header: length 10, type 0, END_STREAM, stream 1; then the message:
        // uncompressed, 5 bytes, field 1 = "svc".
        assert_eq!(&tail[..9], &[0, 0, 10, 0, 1, 0, 0, 0, 1]);
        assert_eq!(&tail[9..], &[0, 0, 0, 0, 5, 0x0a, 3, b's', b'v', b'c'][..]);
        assert!(r.windows(28).any(|w| w == b"/grpc.health.v1.Health/Check"));
    }

    #[test]
    fn serving_is_success_and_anything_else_failure() {
        let mut settings = Vec::new();
        frame(&mut settings, SETTINGS, 0, 0, &[0, 3, 0, 0, 0, 100]);
        let mut s = Session::default();
        let (reply, o) = s.read(&settings, false);
        assert_eq!(reply, [0, 0, 0, SETTINGS, ACK, 0, 0, 0, 0]);
        assert!(o.is_none());
        let mut all = settings.clone();
        all.extend(message(1));
        let (_, o) = s.read(&all, false);
        assert!(o.unwrap().ok);

        let mut s = Session::default();
        let (_, o) = s.read(&message(2), false);
        let o = o.unwrap();
        assert!(!o.ok);
        assert_eq!(
            o.output,
            "service unhealthy (responded with \"NOT_SERVING\")"
        );

        let mut trailers = Vec::new();
        frame(&mut trailers, HEADERS, END_STREAM | END_HEADERS, 1, &[0x88]);
        assert!(!Session::default().read(&trailers, false).1.unwrap().ok);
        assert!(!Session::default().read(&[], true).1.unwrap().ok);
        assert!(Session::default()
            .read(&message(1)[..10], false)
            .1
            .is_none());
    }

    #[test]
    fn hpack_integers() {
        let mut v = Vec::new();
        hpack_int(&mut v, 0, 5, 1337);
        assert_eq!(v, [31, 154, 10]);
    }
}
