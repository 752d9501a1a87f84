//! `podinit attach`: the attach and resize routes, and the attach sessions' input carried
//! to the containers' stdin without ever blocking the loop (docs/interface.md §3).

use crate::api::server::Reply;
use crate::pod::attach::{self, StdinEnd};
use std::os::fd::{AsFd, AsRawFd};

use super::api::error;
use super::Supervisor;
use crate::api::Error as ApiError;

impl Supervisor<'_> {
    /// `POST /v1/containers/NAME/attach[?stdin=true]`.
    pub(super) fn attach_route(&mut self, name: &str, want_stdin: bool) -> Reply {
        let Some(i) = self.index_of(name) else {
            return self.not_in_pod(name);
        };
        let phase = crate::pod::phase(&self.cfg.plan, &self.st);
        if matches!(
            phase,
            crate::pod::PodPhase::Succeeded | crate::pod::PodPhase::Failed
        ) {
            return error(ApiError::BadRequest(format!(
                "cannot attach a container in a completed pod; current phase is {}",
                phase.as_str()
            )));
        }
        let c = &self.containers[i].ctr;
        let Some(run) = c
            .run
            .as_ref()
            .filter(|_| self.st.containers[i].phase == crate::pod::state::Phase::Running)
        else {
            return error(ApiError::Conflict(format!(
                "container {name:?} is not running"
            )));
        };
        let tty = c.spec(self.cfg.pod_spec()).tty == Some(true);
        let s = attach::session(want_stdin, run.stdin.is_some(), tty);
        Reply::Attach {
            container: name.to_string(),
            stdin: s.stdin,
        }
    }

    /// `POST /v1/containers/NAME/resize` with `{"width":W,"height":H}` (kubectl's
    /// `TerminalSize`): the terminal's new size, as the CRI sets it on the master.
    pub(super) fn resize_route(&mut self, name: &str, body: &[u8]) -> Reply {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Size {
            width: u16,
            height: u16,
        }
        let size: Size = match serde_json::from_slice(body) {
            Ok(s) => s,
            Err(e) => return error(ApiError::BadRequest(format!("resize request body: {e}"))),
        };
        let Some(i) = self.index_of(name) else {
            return self.not_in_pod(name);
        };
        let Some(console) = self.containers[i]
            .ctr
            .run
            .as_ref()
            .and_then(|r| r.console.as_ref())
        else {
            return error(ApiError::BadRequest(format!(
                "container {name} did not allocate a TTY (tty: true)"
            )));
        };
        match crate::sys::pty::set_size(console.as_raw_fd(), size.height, size.width) {
            Ok(()) => super::api::success(200, "terminal resized"),
            Err(e) => error(ApiError::Internal(format!("resizing the terminal: {e}"))),
        }
    }

    /// Give the attach sessions' input to their containers, as much as each stdin takes
    /// now; an ended input closes the container's stdin or ends the session
    /// (`pod::attach::stdin_end`). Remembers which stdins to wait on.
    pub(super) fn pump_attach_input(&mut self) {
        let Some(srv) = self.server.as_mut() else {
            return;
        };
        let containers = &self.containers;
        let mut ended: Vec<String> = Vec::new();
        let waiting = srv.attach_input(&mut |name, data, eof| {
            if eof {
                ended.push(name.to_string());
                return 0;
            }
            let run = containers
                .iter()
                .find(|m| m.ctr.name == name)
                .and_then(|m| m.ctr.run.as_ref());
            let Some(fd) = run.and_then(|r| r.stdin.as_ref()) else {
                // Nowhere to go any more (the run ended, or its stdin was closed).
                return data.len();
            };
            match nix::unistd::write(fd, data) {
                Ok(n) => n,
                Err(nix::errno::Errno::EAGAIN) | Err(nix::errno::Errno::EINTR) => 0,
                // The container closed its end: what it will not read is dropped.
                Err(_) => data.len(),
            }
        });
        for name in ended {
            let Some(i) = self.index_of(&name) else {
                continue;
            };
            let spec = self.containers[i].ctr.spec(self.cfg.pod_spec());
            match attach::stdin_end(spec.stdin_once == Some(true), spec.tty == Some(true)) {
                StdinEnd::CloseContainerStdin => {
                    if let Some(run) = self.containers[i].ctr.run.as_mut() {
                        run.stdin = None;
                    }
                }
                StdinEnd::EndSession => {
                    if let Some(srv) = self.server.as_mut() {
                        srv.end_finished_attach(&name);
                    }
                }
            }
        }
        self.stdin_waiting = waiting;
    }

    /// The stdins that have input waiting: polled for room.
    pub(super) fn stdin_fds(&self) -> Vec<std::os::fd::BorrowedFd<'_>> {
        self.stdin_waiting
            .iter()
            .filter_map(|n| self.index_of(n))
            .filter_map(|i| self.containers[i].ctr.run.as_ref())
            .filter_map(|r| r.stdin.as_ref().map(|f| f.as_fd()))
            .collect()
    }
}
