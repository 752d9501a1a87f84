//! The Task service containerd calls: each ttrpc method answered from the task table
//! (`service.rs`), with containerd's statuses and errors.

use std::collections::HashMap;

use containerd_shim::api;
use containerd_shim::protos::events::task as ev;
use containerd_shim::protos::protobuf::MessageField;
use containerd_shim::protos::topics;
use containerd_shim::protos::ttrpc::Code;
use containerd_shim::{TtrpcContext, TtrpcResult};

use super::metrics;
use super::service::{err, not_found, Service};
use super::stdio::Paths;
use super::tasks::{self, Proc, Status};

/// The `Any` type of a process's details in a Pids answer, as `Any::pack` names it.
const PROCESS_DETAILS: &str = "type.googleapis.com/containerd.runc.v1.ProcessDetails";

fn status_of(s: Status) -> api::Status {
    match s {
        Status::Created => api::Status::CREATED,
        Status::Running => api::Status::RUNNING,
        Status::Paused => api::Status::PAUSED,
        Status::Stopped => api::Status::STOPPED,
    }
}

impl containerd_shim::Task for Service {
    fn create(
        &self,
        _: &TtrpcContext,
        req: api::CreateTaskRequest,
    ) -> TtrpcResult<api::CreateTaskResponse> {
        let pid = self.0.create(&req)?;
        Ok(api::CreateTaskResponse {
            pid,
            ..Default::default()
        })
    }

    fn start(&self, _: &TtrpcContext, req: api::StartRequest) -> TtrpcResult<api::StartResponse> {
        let pid = self.0.start(&req.id, &req.exec_id)?;
        Ok(api::StartResponse {
            pid,
            ..Default::default()
        })
    }

    fn delete(
        &self,
        _: &TtrpcContext,
        req: api::DeleteRequest,
    ) -> TtrpcResult<api::DeleteResponse> {
        self.0.delete(&req.id, &req.exec_id)
    }

    fn state(&self, _: &TtrpcContext, req: api::StateRequest) -> TtrpcResult<api::StateResponse> {
        let map = self.0.lock();
        let c = map
            .get(&req.id)
            .ok_or_else(|| not_found("container", &req.id))?;
        let p = c
            .proc(&req.exec_id)
            .ok_or_else(|| not_found("process", &req.exec_id))?;
        let e = p.exit;
        Ok(api::StateResponse {
            id: if req.exec_id.is_empty() {
                req.id.clone()
            } else {
                req.exec_id.clone()
            },
            bundle: c.bundle.to_string_lossy().into_owned(),
            pid: p.pid as u32,
            status: status_of(p.status).into(),
            stdin: p.paths.stdin.clone(),
            stdout: p.paths.stdout.clone(),
            stderr: p.paths.stderr.clone(),
            terminal: p.paths.terminal,
            exit_status: e.map_or(0, |e| e.status),
            exited_at: e.map_or(MessageField::none(), |e| {
                MessageField::some(tasks::timestamp(e.at))
            }),
            exec_id: req.exec_id.clone(),
            ..Default::default()
        })
    }

    fn pids(&self, _: &TtrpcContext, req: api::PidsRequest) -> TtrpcResult<api::PidsResponse> {
        let bundle = self.0.bundle_of(&req.id)?;
        let out = self
            .0
            .runc
            .output(&self.0.log(&bundle), &["ps", "--format", "json", &req.id])
            .map_err(|e| err(Code::UNKNOWN, e))?;
        let pids: Vec<u32> = serde_json::from_str(out.trim()).unwrap_or_default();
        let map = self.0.lock();
        let execs: HashMap<u32, String> = map
            .get(&req.id)
            .map(|c| {
                c.execs
                    .iter()
                    .map(|(k, p)| (p.pid as u32, k.clone()))
                    .collect()
            })
            .unwrap_or_default();
        let processes = pids
            .into_iter()
            .map(|pid| {
                let mut info = containerd_shim::protos::api::ProcessInfo {
                    pid,
                    ..Default::default()
                };
                if let Some(exec) = execs.get(&pid) {
                    let d = containerd_shim::protos::shim::oci::ProcessDetails {
                        exec_id: exec.clone(),
                        ..Default::default()
                    };
                    if let Ok(a) = super::pack::any(PROCESS_DETAILS, &d) {
                        info.info = MessageField::some(a);
                    }
                }
                info
            })
            .collect();
        Ok(api::PidsResponse {
            processes,
            ..Default::default()
        })
    }

    fn pause(&self, _: &TtrpcContext, req: api::PauseRequest) -> TtrpcResult<api::Empty> {
        self.0.set_paused(&req.id, true)?;
        Ok(api::Empty::default())
    }

    fn resume(&self, _: &TtrpcContext, req: api::ResumeRequest) -> TtrpcResult<api::Empty> {
        self.0.set_paused(&req.id, false)?;
        Ok(api::Empty::default())
    }

    fn kill(&self, _: &TtrpcContext, req: api::KillRequest) -> TtrpcResult<api::Empty> {
        self.0.kill(&req)?;
        Ok(api::Empty::default())
    }

    fn exec(&self, _: &TtrpcContext, req: api::ExecProcessRequest) -> TtrpcResult<api::Empty> {
        let mut map = self.0.lock();
        let c = map
            .get_mut(&req.id)
            .ok_or_else(|| not_found("container", &req.id))?;
        if c.execs.contains_key(&req.exec_id) {
            return Err(err(
                Code::ALREADY_EXISTS,
                format!("id {}: already exists", req.exec_id),
            ));
        }
        if c.init.status == Status::Stopped {
            return Err(err(
                Code::FAILED_PRECONDITION,
                format!("container {}: is stopped", req.id),
            ));
        }
        let mut p = Proc::new(Paths {
            stdin: req.stdin.clone(),
            stdout: req.stdout.clone(),
            stderr: req.stderr.clone(),
            terminal: req.terminal,
        });
        p.spec = Some(
            req.spec
                .as_ref()
                .map(|a| a.value.clone())
                .unwrap_or_default(),
        );
        c.execs.insert(req.exec_id.clone(), p);
        drop(map);
        self.0.publish(
            topics::TASK_EXEC_ADDED_EVENT_TOPIC,
            Box::new(ev::TaskExecAdded {
                container_id: req.id.clone(),
                exec_id: req.exec_id.clone(),
                ..Default::default()
            }),
        );
        Ok(api::Empty::default())
    }

    fn resize_pty(&self, _: &TtrpcContext, req: api::ResizePtyRequest) -> TtrpcResult<api::Empty> {
        use std::os::fd::AsRawFd;
        let map = self.0.lock();
        let c = map
            .get(&req.id)
            .ok_or_else(|| not_found("container", &req.id))?;
        let p = c
            .proc(&req.exec_id)
            .ok_or_else(|| not_found("process", &req.exec_id))?;
        let Some(m) = &p.io.console else {
            return Err(err(
                Code::FAILED_PRECONDITION,
                "the process has no terminal",
            ));
        };
        podinit::sys::pty::set_size(m.as_raw_fd(), req.height as u16, req.width as u16)
            .map_err(|e| err(Code::UNKNOWN, format!("resizing the terminal: {e}")))?;
        Ok(api::Empty::default())
    }

    fn close_io(&self, _: &TtrpcContext, req: api::CloseIORequest) -> TtrpcResult<api::Empty> {
        // containerd closes its end of the stdin FIFO before this call: the copy into the
        // process's stdin then ends, and the process reads end-of-file.
        let map = self.0.lock();
        let c = map
            .get(&req.id)
            .ok_or_else(|| not_found("container", &req.id))?;
        c.proc(&req.exec_id)
            .ok_or_else(|| not_found("process", &req.exec_id))?;
        Ok(api::Empty::default())
    }

    fn update(&self, _: &TtrpcContext, req: api::UpdateTaskRequest) -> TtrpcResult<api::Empty> {
        let bundle = self.0.bundle_of(&req.id)?;
        let json = req
            .resources
            .as_ref()
            .map(|a| a.value.clone())
            .unwrap_or_default();
        let file = self.0.runc.root.join(format!("update-{}.json", req.id));
        std::fs::write(&file, &json)
            .map_err(|e| err(Code::UNKNOWN, format!("writing {}: {e}", file.display())))?;
        let f = file.to_string_lossy().into_owned();
        let r = self.0.runc.run(
            &self.0.log(&bundle),
            &["update", "--resources", &f, &req.id],
            super::runc::Streams::none(),
        );
        let _ = std::fs::remove_file(&file);
        r.map_err(|e| err(Code::UNKNOWN, e))?;
        Ok(api::Empty::default())
    }

    fn wait(&self, _: &TtrpcContext, req: api::WaitRequest) -> TtrpcResult<api::WaitResponse> {
        self.0.wait(&req.id, &req.exec_id)
    }

    fn stats(&self, _: &TtrpcContext, req: api::StatsRequest) -> TtrpcResult<api::StatsResponse> {
        if !self.0.lock().contains_key(&req.id) {
            return Err(not_found("container", &req.id));
        }
        let root = podinit::runc::state::Root(self.0.runc.root.clone());
        let s = podinit::runc::state::load(&root, &req.id).map_err(|e| err(Code::NOT_FOUND, e))?;
        let group =
            podinit::cgroup::recorded::open(&req.id, s.cgroups_path.as_deref(), &s.cgroup_paths)
                .map_err(|e| err(Code::UNKNOWN, e))?;
        let any = metrics::to_any(&group.stats(), podinit::sys::cgroup::unified())
            .map_err(|e| err(Code::UNKNOWN, e))?;
        Ok(api::StatsResponse {
            stats: MessageField::some(any),
            ..Default::default()
        })
    }

    fn connect(
        &self,
        _: &TtrpcContext,
        req: api::ConnectRequest,
    ) -> TtrpcResult<api::ConnectResponse> {
        let task_pid = self.0.lock().get(&req.id).map_or(0, |c| c.init.pid as u32);
        Ok(api::ConnectResponse {
            shim_pid: std::process::id(),
            task_pid,
            version: env!("CARGO_PKG_VERSION").into(),
            ..Default::default()
        })
    }

    fn shutdown(&self, _: &TtrpcContext, _: api::ShutdownRequest) -> TtrpcResult<api::Empty> {
        if self.0.lock().is_empty() {
            self.0.exit.signal();
        }
        Ok(api::Empty::default())
    }
}

#[cfg(test)]
mod tests {
    /// The hand-packed name is the one `Any::pack` gives (reflection, in the test only).
    #[test]
    fn process_details_are_named_as_any_pack_names_them() {
        let d = containerd_shim::protos::shim::oci::ProcessDetails::default();
        let any = containerd_shim::protos::protobuf::well_known_types::any::Any::pack(&d).unwrap();
        assert_eq!(any.type_url, super::PROCESS_DETAILS);
    }
}
