//! One process of a container, its init or an exec, as containerd's runc shim keeps it
//! (`ProcessTemplate`): its status, its exit and its streams.

use std::time::SystemTime;

use containerd_shim::api;
use containerd_shim::protos::protobuf::MessageField;

use super::reaper::Exit;
use super::stdio::{Io, Paths};
use super::tasks;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Created,
    Running,
    Paused,
    Stopped,
}

impl Status {
    /// The status as containerd's API names it.
    pub fn api(self) -> api::Status {
        match self {
            Status::Created => api::Status::CREATED,
            Status::Running => api::Status::RUNNING,
            Status::Paused => api::Status::PAUSED,
            Status::Stopped => api::Status::STOPPED,
        }
    }

    /// The status in an error's words.
    pub fn name(self) -> &'static str {
        match self {
            Status::Created => "created",
            Status::Running => "running",
            Status::Paused => "paused",
            Status::Stopped => "stopped",
        }
    }
}

/// One process: a container's init or an exec.
pub struct Proc {
    /// Host pid; 0 for an exec not started yet.
    pub pid: i32,
    pub status: Status,
    pub exit: Option<Exit>,
    pub paths: Paths,
    pub io: Io,
    /// An exec's process (JSON of the OCI `process`), until started.
    pub spec: Option<Vec<u8>>,
    /// `start` is running: an exit now is held in `pending` until TaskStart is out, so
    /// that containerd never sees an exit before the start.
    pub starting: bool,
    pub pending: Option<Exit>,
}

impl Proc {
    pub fn new(paths: Paths) -> Proc {
        Proc {
            pid: 0,
            status: Status::Created,
            exit: None,
            paths,
            io: Io::default(),
            spec: None,
            starting: false,
            pending: None,
        }
    }

    /// Running or paused: what Delete refuses.
    pub fn is_live(&self) -> bool {
        matches!(self.status, Status::Running | Status::Paused)
    }

    pub fn set_exited(&mut self, exit: Exit) {
        self.exit = Some(exit);
        self.status = Status::Stopped;
    }

    /// Delete's answer: the exit, or now and 0 for a process that never ran.
    pub fn delete_response(&self) -> api::DeleteResponse {
        let e = self.exit.unwrap_or(Exit {
            status: 0,
            at: SystemTime::now(),
        });
        api::DeleteResponse {
            pid: self.pid as u32,
            exit_status: e.status,
            exited_at: MessageField::some(tasks::timestamp(e.at)),
            ..Default::default()
        }
    }

    /// Wait's answer, once the process has exited.
    pub fn wait_response(&self) -> Option<api::WaitResponse> {
        self.exit.map(|e| api::WaitResponse {
            exit_status: e.status,
            exited_at: MessageField::some(tasks::timestamp(e.at)),
            ..Default::default()
        })
    }

    /// State's answer for this process of container `id` (`exec` empty for its init).
    pub fn state(&self, id: &str, exec: &str, bundle: &str) -> api::StateResponse {
        let e = self.exit;
        api::StateResponse {
            id: if exec.is_empty() { id } else { exec }.to_string(),
            bundle: bundle.to_string(),
            pid: self.pid as u32,
            status: self.status.api().into(),
            stdin: self.paths.stdin.clone(),
            stdout: self.paths.stdout.clone(),
            stderr: self.paths.stderr.clone(),
            terminal: self.paths.terminal,
            exit_status: e.map_or(0, |e| e.status),
            exited_at: e.map_or(MessageField::none(), |e| {
                MessageField::some(tasks::timestamp(e.at))
            }),
            exec_id: exec.to_string(),
            ..Default::default()
        }
    }
}
