//! Probes' and lifecycle hooks' handlers, run without ever blocking the supervisor
//! (docs/architecture.md: `probe/`). [`handler`] says what to run, [`Check`] is one run in flight:
//! the supervisor polls its fds, reports its process's exit, and expires it at its
//! deadline; each ends in an [`Outcome`]. Network checks use the supervisor's network
//! namespace, which is the pod's.

pub mod error;
pub mod exec;
pub mod grpc;
pub mod handler;
pub mod http;
pub mod net;
#[cfg(feature = "tls")]
pub mod tls;

use nix::poll::PollFlags;
use std::os::fd::BorrowedFd;

pub use error::Error;
pub use handler::{Handler, HandlerError, Use};

/// How a check ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub ok: bool,
    /// The handler's output (exec output, HTTP body) or the error.
    pub output: String,
    /// Success with a warning (an HTTP redirect to another host): a `ProbeWarning` event.
    pub warning: Option<String>,
    /// The handler could not run at all (`output` says why): kubelet's prober error,
    /// which counts as a failure but is told apart in the event.
    pub errored: bool,
}

impl Outcome {
    pub fn ok(output: String) -> Outcome {
        Outcome {
            ok: true,
            output,
            warning: None,
            errored: false,
        }
    }
    pub fn fail(output: String) -> Outcome {
        Outcome {
            ok: false,
            output,
            warning: None,
            errored: false,
        }
    }
    /// The handler did not run: `why` is the error.
    pub fn error(why: String) -> Outcome {
        Outcome {
            errored: true,
            ..Outcome::fail(why)
        }
    }
}

/// One handler run in flight.
pub enum Check {
    Exec(exec::ExecCheck),
    Net(Box<net::NetCheck>),
    /// `sleep`: ends at its deadline.
    Sleep,
}

impl Check {
    /// Start a network or sleep handler (exec handlers are started by the caller, which
    /// knows the container, through [`exec::ExecCheck::new`]).
    pub fn start_net(h: &Handler, use_: Use) -> Result<Check, Error> {
        let c = match h {
            Handler::Tcp { host, port } => net::NetCheck::tcp(host, *port)?,
            Handler::Http(g) => net::NetCheck::http(g.clone(), use_)?,
            Handler::Grpc {
                host,
                port,
                service,
            } => net::NetCheck::grpc(host, *port, service)?,
            Handler::Sleep { .. } => return Ok(Check::Sleep),
            Handler::Exec(_) => return Err(Error::NotNetwork),
        };
        Ok(Check::Net(Box::new(c)))
    }

    /// The fds to poll and for what.
    pub fn interest(&self) -> Vec<(BorrowedFd<'_>, PollFlags)> {
        match self {
            Check::Exec(e) => e
                .fds()
                .into_iter()
                .map(|f| (f, PollFlags::POLLIN))
                .collect(),
            Check::Net(n) => vec![(n.fd(), n.interest())],
            Check::Sleep => Vec::new(),
        }
    }

    /// An fd of this check is ready.
    pub fn on_ready(&mut self) -> Option<Outcome> {
        match self {
            Check::Exec(e) => e.on_ready(),
            Check::Net(n) => match n.advance() {
                net::Progress::Pending => None,
                net::Progress::Done(o) => Some(o),
            },
            Check::Sleep => None,
        }
    }

    /// The deadline passed: what that means (a sleep is done, anything else timed out).
    pub fn on_deadline(&mut self) -> Outcome {
        match self {
            Check::Exec(e) => e.timed_out(),
            Check::Net(n) => n.timeout(),
            Check::Sleep => Outcome::ok(String::new()),
        }
    }

    /// The process of an exec check, to match against reaped pids.
    pub fn pid(&self) -> Option<i32> {
        match self {
            Check::Exec(e) => Some(e.pid),
            _ => None,
        }
    }
}
