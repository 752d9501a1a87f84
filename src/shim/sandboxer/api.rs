//! The sandbox service's ttrpc methods: each calls one method of the table of sandboxes
//! (`mod.rs`), and its error becomes a ttrpc code where the Task service's do
//! (`error.rs`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use containerd_shim::protos::protobuf::MessageField;
use containerd_shim::protos::sandbox_api as api;
use containerd_shim::protos::sandbox_sync::{create_sandbox, Sandbox};
use containerd_shim::protos::ttrpc::{MethodHandler, TtrpcContext};
use containerd_shim::TtrpcResult;

use super::super::tasks::timestamp;
use super::Sandboxer;

pub fn methods(s: Arc<Sandboxer>) -> HashMap<String, Box<dyn MethodHandler + Send + Sync>> {
    create_sandbox(Arc::new(Service(s)))
}

struct Service(Arc<Sandboxer>);

/// StopSandbox's grace before SIGKILL when containerd names none.
const DEFAULT_STOP: Duration = Duration::from_secs(10);

/// containerd's name for this machine's architecture (GOARCH).
fn goarch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        other => other,
    }
}

impl Sandbox for Service {
    fn create_sandbox(
        &self,
        _: &TtrpcContext,
        req: api::CreateSandboxRequest,
    ) -> TtrpcResult<api::CreateSandboxResponse> {
        let (url, value) = req
            .options
            .as_ref()
            .map(|a| (a.type_url.as_str(), a.value.as_slice()))
            .unwrap_or_default();
        self.0.create(
            &req.sandbox_id,
            &req.bundle_path,
            (url, value),
            &req.netns_path,
        )?;
        Ok(api::CreateSandboxResponse::default())
    }

    fn start_sandbox(
        &self,
        _: &TtrpcContext,
        req: api::StartSandboxRequest,
    ) -> TtrpcResult<api::StartSandboxResponse> {
        let (pid, created) = self.0.start(&req.sandbox_id)?;
        Ok(api::StartSandboxResponse {
            pid,
            created_at: MessageField::some(timestamp(created)),
            ..Default::default()
        })
    }

    fn platform(
        &self,
        _: &TtrpcContext,
        req: api::PlatformRequest,
    ) -> TtrpcResult<api::PlatformResponse> {
        self.0.exists(&req.sandbox_id)?;
        let mut resp = api::PlatformResponse::default();
        let p = resp.platform.mut_or_insert_default();
        p.os = "linux".into();
        p.architecture = goarch().into();
        Ok(resp)
    }

    fn stop_sandbox(
        &self,
        _: &TtrpcContext,
        req: api::StopSandboxRequest,
    ) -> TtrpcResult<api::StopSandboxResponse> {
        // No timeout given (containerd's CRI gives none): pause ends on SIGTERM at once,
        // so SIGKILL comes only for a PID 1 that does not.
        let timeout = match req.timeout_secs {
            0 => DEFAULT_STOP,
            s => Duration::from_secs(s.into()),
        };
        self.0.stop(&req.sandbox_id, timeout)?;
        Ok(api::StopSandboxResponse::default())
    }

    fn wait_sandbox(
        &self,
        _: &TtrpcContext,
        req: api::WaitSandboxRequest,
    ) -> TtrpcResult<api::WaitSandboxResponse> {
        let (status, at) = self.0.wait(&req.sandbox_id)?;
        Ok(api::WaitSandboxResponse {
            exit_status: status,
            exited_at: MessageField::some(timestamp(at)),
            ..Default::default()
        })
    }

    fn sandbox_status(
        &self,
        _: &TtrpcContext,
        req: api::SandboxStatusRequest,
    ) -> TtrpcResult<api::SandboxStatusResponse> {
        let s = self.0.status(&req.sandbox_id)?;
        let mut info = HashMap::new();
        if req.verbose {
            info.insert("info".to_string(), s.info.to_string());
        }
        Ok(api::SandboxStatusResponse {
            sandbox_id: req.sandbox_id,
            pid: s.pid,
            state: s.state.into(),
            info,
            created_at: MessageField::some(timestamp(s.created_at)),
            exited_at: s.exited_at.map(timestamp).into(),
            ..Default::default()
        })
    }

    fn ping_sandbox(
        &self,
        _: &TtrpcContext,
        req: api::PingRequest,
    ) -> TtrpcResult<api::PingResponse> {
        self.0.exists(&req.sandbox_id)?;
        Ok(api::PingResponse::default())
    }

    fn shutdown_sandbox(
        &self,
        ctx: &TtrpcContext,
        req: api::ShutdownSandboxRequest,
    ) -> TtrpcResult<api::ShutdownSandboxResponse> {
        self.0.shutdown(&req.sandbox_id, Some(ctx.fd))?;
        Ok(api::ShutdownSandboxResponse::default())
    }

    fn sandbox_metrics(
        &self,
        _: &TtrpcContext,
        req: api::SandboxMetricsRequest,
    ) -> TtrpcResult<api::SandboxMetricsResponse> {
        let data = self.0.metrics(&req.sandbox_id)?;
        let mut resp = api::SandboxMetricsResponse::default();
        let m = resp.metrics.mut_or_insert_default();
        m.timestamp = MessageField::some(timestamp(std::time::SystemTime::now()));
        m.id = req.sandbox_id;
        m.data = MessageField::some(data);
        Ok(resp)
    }
}
