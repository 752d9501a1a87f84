//! The shim's ttrpc server: the crate's generated method handlers, served with fewer
//! threads than ttrpc's sync server, which moves every request through a reader, a pool
//! worker and a writer thread. containerd 2 asks every container's shim for its Stats
//! every second, so an idle pod's shim woke several times a second for one answer. Here
//! one thread per connection reads each request, answers the quick ones itself
//! (`INLINE`: they read what the shim holds and never wait on another call), and starts a
//! thread for any other, which may block (Wait) or run a runtime verb. Whoever answers
//! writes the reply, header and body in one write. The wire format is ttrpc's; docs/cri.md
//! §5 says why the shim serves it itself (BENCHMARKS.md, what it saves).

use std::collections::HashMap;
use std::io::{BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::{mpsc, Arc, Mutex};

use containerd_shim::protos::protobuf::Message;
use containerd_shim::protos::ttrpc::proto::{
    Code, MessageHeader, Request, Response, MESSAGE_HEADER_LENGTH, MESSAGE_LENGTH_MAX,
    MESSAGE_TYPE_REQUEST, MESSAGE_TYPE_RESPONSE,
};
use containerd_shim::protos::ttrpc::{context, get_status, MethodHandler, TtrpcContext};

use super::orphan::Peers;

/// The ttrpc methods served, by their path (`/<service>/<method>`).
pub type Methods = HashMap<String, Box<dyn MethodHandler + Send + Sync>>;

/// The methods answered on the connection's own thread: each reads the shim's tables or a
/// container's kept cgroup files, takes no lock that is held across a runtime verb or a
/// wait, and runs no process. Every other method gets a thread of its own.
const INLINE: &[&str] = &[
    "/containerd.task.v2.Task/Stats",
    "/containerd.task.v3.Task/Stats",
    "/containerd.task.v2.Task/State",
    "/containerd.task.v3.Task/State",
    "/containerd.task.v2.Task/Connect",
    "/containerd.task.v3.Task/Connect",
    "/containerd.runtime.sandbox.v1.Sandbox/SandboxMetrics",
    "/containerd.runtime.sandbox.v1.Sandbox/SandboxStatus",
    "/containerd.runtime.sandbox.v1.Sandbox/PingSandbox",
    "/containerd.runtime.sandbox.v1.Sandbox/Platform",
];

/// Serves `methods` on `listener` from a thread of its own, for as long as the process
/// lives (the shim ends by exiting); `peers` counts the connections open.
pub fn start(listener: UnixListener, methods: Methods, peers: Arc<Peers>) -> std::io::Result<()> {
    let methods = Arc::new(methods);
    std::thread::Builder::new()
        .name("ttrpc-accept".into())
        .spawn(move || {
            for conn in listener.incoming() {
                match conn {
                    Ok(c) => {
                        let methods = Arc::clone(&methods);
                        peers.opened();
                        let p = Arc::clone(&peers);
                        let spawned = std::thread::Builder::new().name("ttrpc-conn".into()).spawn(
                            move || {
                                serve(c, &methods);
                                p.closed();
                            },
                        );
                        if let Err(e) = spawned {
                            peers.closed();
                            super::say::warn(format_args!("a connection's thread: {e}"));
                        }
                    }
                    // A connection that went before it was accepted, or no fd or memory
                    // left for now: the next accept may do.
                    Err(e) => {
                        super::say::warn(format_args!("accepting a connection: {e}"));
                        if e.raw_os_error().is_some_and(|n| {
                            [libc::EMFILE, libc::ENFILE, libc::ENOBUFS, libc::ENOMEM].contains(&n)
                        }) {
                            std::thread::sleep(std::time::Duration::from_millis(100));
                        }
                    }
                }
            }
        })
        .map(drop)
}

/// The write side of a connection, shared by whoever answers on it.
type Writer = Arc<Mutex<UnixStream>>;

/// One connection: its requests, in order, until the peer hangs up.
fn serve(conn: UnixStream, methods: &Arc<Methods>) {
    let fd = conn.as_raw_fd();
    let writer: Writer = match conn.try_clone() {
        Ok(w) => Arc::new(Mutex::new(w)),
        Err(e) => {
            super::say::warn(format_args!("a connection's write side: {e}"));
            return;
        }
    };
    // Dropped when the connection ends: a handler's `cancel_rx` then says so, as ttrpc's.
    let (cancel_tx, cancel_rx) = crossbeam_channel::unbounded::<()>();
    // Most requests and their header arrive in one read.
    let mut reader = BufReader::with_capacity(4096, conn);
    // What the calls answered on this thread reuse from one to the next (containerd asks
    // every container's Stats once a second): their answers' channel, the buffer an answer
    // is framed in, the method's path.
    let (inline_tx, inline_rx) = mpsc::channel();
    let mut out = Vec::new();
    let mut path = String::new();
    while let Some((mh, body)) = read_message(&mut reader) {
        if mh.type_ != MESSAGE_TYPE_REQUEST {
            continue;
        }
        let Some(body) = body else {
            let msg = format!(
                "message length {} exceed maximum message size of {MESSAGE_LENGTH_MAX}",
                mh.length
            );
            reply_status(&writer, mh.stream_id, Code::INVALID_ARGUMENT, msg);
            continue;
        };
        let req = match Request::parse_from_bytes(&body) {
            Ok(r) => r,
            Err(e) => {
                reply_status(&writer, mh.stream_id, Code::INVALID_ARGUMENT, e.to_string());
                continue;
            }
        };
        path.clear();
        path.extend(["/", &req.service, "/", &req.method]);
        let Some(method) = methods.get(&path) else {
            let msg = format!("{path} does not exist");
            reply_status(&writer, mh.stream_id, Code::INVALID_ARGUMENT, msg);
            continue;
        };
        let call = Call {
            fd,
            mh,
            req,
            cancel_rx: cancel_rx.clone(),
            writer: Arc::clone(&writer),
        };
        if INLINE.contains(&path.as_str()) {
            call.run(method.as_ref(), inline_tx.clone(), &inline_rx, &mut out);
            continue;
        }
        let methods = Arc::clone(methods);
        let path = path.clone();
        let spawned = std::thread::Builder::new()
            .name("ttrpc-call".into())
            .spawn(move || {
                let (tx, rx) = mpsc::channel();
                call.run(methods[&path].as_ref(), tx, &rx, &mut Vec::new())
            });
        if let Err(e) = spawned {
            super::say::warn(format_args!("a call's thread: {e}"));
            break;
        }
    }
    drop(cancel_tx);
}

/// What a handler puts its answer on: the header and the encoded Response.
type Answer = (MessageHeader, Vec<u8>);

/// A request and what answering it takes.
struct Call {
    fd: i32,
    mh: MessageHeader,
    req: Request,
    cancel_rx: crossbeam_channel::Receiver<()>,
    writer: Writer,
}

impl Call {
    /// Runs the method's handler, which puts its answer on the context's channel, and
    /// writes the answer, framed in `out`. A handler that fails could not read its request
    /// or encode its answer: the connection is shut, as ttrpc's server does.
    fn run(
        self,
        method: &(dyn MethodHandler + Send + Sync),
        res_tx: mpsc::Sender<Answer>,
        res_rx: &mpsc::Receiver<Answer>,
        out: &mut Vec<u8>,
    ) {
        let ctx = TtrpcContext {
            fd: self.fd,
            cancel_rx: self.cancel_rx,
            mh: self.mh,
            res_tx,
            metadata: context::from_pb(&self.req.metadata),
            timeout_nano: self.req.timeout_nano,
        };
        let failed = method.handler(ctx, self.req).is_err();
        while let Ok((mh, body)) = res_rx.try_recv() {
            if !failed {
                write_message(&self.writer, mh, &body, out);
            }
        }
        if failed {
            let w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
            let _ = w.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// A status-only answer (the request was not one to hand to a method).
fn reply_status(writer: &Writer, stream_id: u32, code: Code, msg: String) {
    let mut res = Response::new();
    res.set_status(get_status(code, msg));
    if let Ok(body) = res.write_to_bytes() {
        let mh = MessageHeader::new_response(stream_id, 0);
        write_message(writer, mh, &body, &mut Vec::new());
    }
}

/// An answer, header and body in one write, framed in `out`; a peer that is gone is the
/// reader's to notice.
fn write_message(writer: &Writer, mut mh: MessageHeader, body: &[u8], out: &mut Vec<u8>) {
    mh.type_ = MESSAGE_TYPE_RESPONSE;
    frame_into(mh, body, out);
    let mut w = writer.lock().unwrap_or_else(|p| p.into_inner());
    let _ = w.write_all(out);
}

/// A message as it goes on the wire: the header (with the body's length) and the body.
pub fn frame(mh: MessageHeader, body: &[u8]) -> Vec<u8> {
    let mut buf = Vec::new();
    frame_into(mh, body, &mut buf);
    buf
}

/// [`frame`] into `buf`, cleared first.
fn frame_into(mut mh: MessageHeader, body: &[u8], buf: &mut Vec<u8>) {
    mh.length = body.len() as u32;
    // ttrpc's header: length and stream id big-endian, then type and flags.
    buf.clear();
    buf.extend_from_slice(&mh.length.to_be_bytes());
    buf.extend_from_slice(&mh.stream_id.to_be_bytes());
    buf.extend_from_slice(&[mh.type_, mh.flags]);
    buf.extend_from_slice(body);
}

/// The next message: its header and body (None for a body over ttrpc's limit, which is
/// read and dropped); None at the end of the connection or when it breaks.
pub fn read_message(r: &mut impl Read) -> Option<(MessageHeader, Option<Vec<u8>>)> {
    let mut header = [0u8; MESSAGE_HEADER_LENGTH];
    r.read_exact(&mut header).ok()?;
    let mh = MessageHeader::from(&header);
    let len = mh.length as usize;
    if len > MESSAGE_LENGTH_MAX {
        std::io::copy(&mut r.take(len as u64), &mut std::io::sink()).ok()?;
        return Some((mh, None));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).ok()?;
    Some((mh, Some(body)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(stream_id: u32, req: &Request) -> Vec<u8> {
        let body = req.write_to_bytes().unwrap();
        let mut buf: Vec<u8> = MessageHeader::new_request(stream_id, body.len() as u32).into();
        buf.extend_from_slice(&body);
        buf
    }

    /// A method that echoes its payload, after `gate` lets it when it has one.
    struct Echo {
        gate: Option<Mutex<mpsc::Receiver<()>>>,
    }

    impl MethodHandler for Echo {
        fn handler(
            &self,
            ctx: TtrpcContext,
            req: Request,
        ) -> containerd_shim::protos::ttrpc::Result<()> {
            if let Some(g) = &self.gate {
                g.lock().unwrap().recv().unwrap();
            }
            let mut res = Response::new();
            res.set_status(get_status(Code::OK, String::new()));
            res.payload = req.payload;
            containerd_shim::protos::ttrpc::response_to_channel(ctx.mh.stream_id, res, ctx.res_tx)
        }
    }

    fn request(method: &str, payload: &[u8]) -> Request {
        let mut req = Request::new();
        req.service = "containerd.task.v2.Task".into();
        req.method = method.into();
        req.payload = payload.to_vec();
        req
    }

    /// A call that blocks (Wait) gets a thread of its own: a quick one (State) on the same
    /// connection is answered meanwhile, and both answers reach their callers.
    #[test]
    fn a_blocked_call_holds_up_no_other_on_its_connection() {
        let dir = std::env::temp_dir().join(format!("podinit-ttrpc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.sock");
        let (open, gate) = mpsc::channel();
        let mut methods = Methods::new();
        let wait = Echo {
            gate: Some(Mutex::new(gate)),
        };
        methods.insert("/containerd.task.v2.Task/Wait".into(), Box::new(wait));
        let state = Echo { gate: None };
        methods.insert("/containerd.task.v2.Task/State".into(), Box::new(state));
        let peers = Arc::new(Peers::default());
        start(UnixListener::bind(&path).unwrap(), methods, peers).unwrap();
        let addr = format!("unix://{}", path.display());
        let client = containerd_shim::protos::ttrpc::Client::connect(&addr).unwrap();
        let waiter = {
            let client = client.clone();
            std::thread::spawn(move || client.request(request("Wait", b"w")))
        };
        for i in 0..3u8 {
            let r = client.request(request("State", &[i])).unwrap();
            assert_eq!(r.payload, [i]);
        }
        assert!(!waiter.is_finished(), "Wait answers only once let");
        open.send(()).unwrap();
        assert_eq!(waiter.join().unwrap().unwrap().payload, b"w");
        let e = client.request(request("Nope", b"")).unwrap_err();
        let containerd_shim::protos::ttrpc::Error::RpcStatus(s) = e else {
            panic!("not a status: {e:?}");
        };
        assert_eq!(s.code(), Code::INVALID_ARGUMENT);
        assert_eq!(s.message, "/containerd.task.v2.Task/Nope does not exist");
        drop(client);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The header written by hand is ttrpc's own encoding of it.
    #[test]
    fn a_framed_answer_is_ttrpc_s_header_and_the_body() {
        let mut mh = MessageHeader::new_response(0x0102_0304, 0);
        mh.flags = 7;
        let mut want: Vec<u8> = MessageHeader { length: 3, ..mh }.into();
        want.extend_from_slice(b"abc");
        let mut out = b"left over".to_vec();
        frame_into(mh, b"abc", &mut out);
        assert_eq!(out, want);
        assert_eq!(frame(mh, b"abc"), want);
    }

    #[test]
    fn messages_are_read_back_to_back_and_an_oversized_one_is_dropped() {
        let mut req = Request::new();
        req.service = "containerd.task.v2.Task".into();
        req.method = "Stats".into();
        let mut wire = message(3, &req);
        wire.extend(message(5, &req));
        let mut huge: Vec<u8> =
            MessageHeader::new_request(7, (MESSAGE_LENGTH_MAX + 1) as u32).into();
        huge.resize(huge.len() + MESSAGE_LENGTH_MAX + 1, 0);
        wire.extend(huge);
        let mut r = &wire[..];
        let (mh, body) = read_message(&mut r).unwrap();
        assert_eq!((mh.stream_id, mh.type_), (3, MESSAGE_TYPE_REQUEST));
        assert_eq!(Request::parse_from_bytes(&body.unwrap()).unwrap(), req);
        let (mh, _) = read_message(&mut r).unwrap();
        assert_eq!(mh.stream_id, 5);
        let (mh, body) = read_message(&mut r).unwrap();
        assert_eq!((mh.stream_id, body), (7, None));
        assert!(read_message(&mut r).is_none(), "the end of the connection");
        assert!(
            read_message(&mut &wire[..4]).is_none(),
            "a header cut short"
        );
    }
}
