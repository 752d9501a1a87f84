//! The Task service containerd calls: each ttrpc method finds its container once, calls
//! one of its methods (`container.rs`), and its error becomes a ttrpc code in one place
//! (`error.rs`).

use containerd_shim::api;
use containerd_shim::protos::protobuf::MessageField;
use containerd_shim::{TtrpcContext, TtrpcResult};

use super::service::Service;
use super::stdio::Paths;

/// The bytes of a request's `Any`, empty when it has none.
fn value(
    a: &MessageField<containerd_shim::protos::protobuf::well_known_types::any::Any>,
) -> Vec<u8> {
    a.as_ref().map(|a| a.value.clone()).unwrap_or_default()
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
        let pid = self.0.get(&req.id)?.start(&self.0, &req.exec_id)?;
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
        let c = self.0.get(&req.id)?;
        Ok(if req.exec_id.is_empty() {
            c.delete(&self.0)?
        } else {
            c.delete_exec(&req.exec_id)?
        })
    }

    fn state(&self, _: &TtrpcContext, req: api::StateRequest) -> TtrpcResult<api::StateResponse> {
        Ok(self.0.get(&req.id)?.state(&req.exec_id)?)
    }

    fn pids(&self, _: &TtrpcContext, req: api::PidsRequest) -> TtrpcResult<api::PidsResponse> {
        let processes = self.0.get(&req.id)?.pids(&self.0)?;
        Ok(api::PidsResponse {
            processes,
            ..Default::default()
        })
    }

    fn pause(&self, _: &TtrpcContext, req: api::PauseRequest) -> TtrpcResult<api::Empty> {
        self.0.get(&req.id)?.set_paused(&self.0, true)?;
        Ok(api::Empty::default())
    }

    fn resume(&self, _: &TtrpcContext, req: api::ResumeRequest) -> TtrpcResult<api::Empty> {
        self.0.get(&req.id)?.set_paused(&self.0, false)?;
        Ok(api::Empty::default())
    }

    fn kill(&self, _: &TtrpcContext, req: api::KillRequest) -> TtrpcResult<api::Empty> {
        let c = self.0.get(&req.id)?;
        c.kill(&self.0, &req.exec_id, req.signal, req.all)?;
        Ok(api::Empty::default())
    }

    fn exec(&self, _: &TtrpcContext, req: api::ExecProcessRequest) -> TtrpcResult<api::Empty> {
        let paths = Paths {
            stdin: req.stdin.clone(),
            stdout: req.stdout.clone(),
            stderr: req.stderr.clone(),
            terminal: req.terminal,
        };
        let c = self.0.get(&req.id)?;
        c.add_exec(&self.0, &req.exec_id, paths, value(&req.spec))?;
        Ok(api::Empty::default())
    }

    fn resize_pty(&self, _: &TtrpcContext, req: api::ResizePtyRequest) -> TtrpcResult<api::Empty> {
        let c = self.0.get(&req.id)?;
        c.resize_pty(&req.exec_id, req.width, req.height)?;
        Ok(api::Empty::default())
    }

    fn close_io(&self, _: &TtrpcContext, req: api::CloseIORequest) -> TtrpcResult<api::Empty> {
        self.0.get(&req.id)?.close_io(&req.exec_id)?;
        Ok(api::Empty::default())
    }

    fn update(&self, _: &TtrpcContext, req: api::UpdateTaskRequest) -> TtrpcResult<api::Empty> {
        self.0
            .get(&req.id)?
            .update(&self.0, &value(&req.resources))?;
        Ok(api::Empty::default())
    }

    fn wait(&self, _: &TtrpcContext, req: api::WaitRequest) -> TtrpcResult<api::WaitResponse> {
        Ok(self.0.get(&req.id)?.wait(&req.exec_id)?)
    }

    fn stats(&self, _: &TtrpcContext, req: api::StatsRequest) -> TtrpcResult<api::StatsResponse> {
        let any = self.0.get(&req.id)?.stats(&self.0)?;
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
        let task_pid = self.0.get(&req.id).map_or(0, |c| c.init_pid());
        Ok(api::ConnectResponse {
            shim_pid: std::process::id(),
            task_pid,
            version: env!("CARGO_PKG_VERSION").into(),
            ..Default::default()
        })
    }

    fn shutdown(&self, ctx: &TtrpcContext, _: api::ShutdownRequest) -> TtrpcResult<api::Empty> {
        if self.0.may_exit() {
            self.0.exit_once_answered(Some(ctx.fd));
        }
        Ok(api::Empty::default())
    }
}
