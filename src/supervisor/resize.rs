//! `PATCH /v1/pod/resize`: the API server's part (`pod::resize::patched`), then kubelet's:
//! admission against the node's allocatable, and the new sizes on the cgroups in
//! kubelet's order (`doPodResizeAction`): the pod's cgroup first when its memory limit
//! grows, last when it shrinks; each container by its `resizePolicy`, in place or by a
//! restart; never a memory limit below what the cgroup uses now.

use super::api::{error, line};
use super::Supervisor;
use crate::api::http::Request;
use crate::api::server::Reply;
use crate::api::Error as ApiError;
use crate::pod::resize::{self, ContainerResize, PatchKind};
use k8s_openapi::api::core::v1::{Container, PodSpec};

impl Supervisor<'_> {
    pub(super) fn pod_resize_route(&mut self, req: &Request) -> Reply {
        let kind = match req.content_type.as_deref() {
            None | Some("application/json") | Some("application/strategic-merge-patch+json") => {
                PatchKind::Strategic
            }
            Some("application/merge-patch+json") => PatchKind::Merge,
            Some(t) => {
                return error(ApiError::UnsupportedMediaType(format!("the server does not support the patch type {t:?} for resize (strategic-merge or merge patches)")))
            }
        };
        let patch: serde_json::Value = match serde_json::from_slice(&req.body) {
            Ok(v) => v,
            Err(e) => return error(ApiError::BadRequest(format!("invalid JSON patch: {e}"))),
        };
        let validate = |p: &k8s_openapi::api::core::v1::Pod| {
            crate::manifest::validate_pod(p).map_err(|e| (e.field, e.message))
        };
        // Through the manifest's typed reader, whose deserializers the binary has already.
        let decode = |v: &serde_json::Value| {
            crate::tracked::deserialize::<k8s_openapi::api::core::v1::Pod>(v)
                .map_err(|(_, e)| e.to_string())
        };
        let new = match resize::patched(&self.cfg.pod, &patch, kind, &decode, &validate) {
            Ok(p) => p,
            Err(e) => {
                let name = self.cfg.pod.metadata.name.clone().unwrap_or_default();
                let at = if e.field.is_empty() {
                    String::new()
                } else {
                    format!("{}: ", e.field)
                };
                return error(ApiError::Invalid(format!(
                    "Pod {name:?} is invalid: {at}{}",
                    e.message
                )));
            }
        };
        let old = self.cfg.pod.spec.clone().unwrap_or_default();
        let changed = new.spec != self.cfg.pod.spec;
        self.cfg.plan.generation = new.metadata.generation.unwrap_or(1);
        self.cfg.pod = new;
        if changed {
            self.status.pod_changed();
            self.apply_resize(&old);
        }
        self.write_status();
        let mut body = self.pod_line();
        if body.last() == Some(&b'\n') {
            body.pop();
        }
        Reply::Full {
            code: 200,
            content_type: "application/json",
            body: line(body),
        }
    }

    /// kubelet's side of an accepted resize.
    fn apply_resize(&mut self, old: &PodSpec) {
        let spec = self.cfg.pod.spec.clone().unwrap_or_default();
        let (cpu, mem) = self.cfg.node_allocatable;
        if let Err((reason, msg)) = resize::admit(&spec, i128::from(cpu), i128::from(mem)) {
            self.st.resize_pending = Some((reason.to_string(), msg));
            return;
        }
        self.st.resize_pending = None;
        self.st.resize_error = None;
        let find = |name: &str| -> Option<Container> {
            spec.containers
                .iter()
                .chain(spec.init_containers.iter().flatten())
                .find(|c| c.name == name)
                .cloned()
        };
        let (mut in_place, mut restarts) = (Vec::new(), Vec::new());
        for (i, m) in self.containers.iter_mut().enumerate() {
            let Some(new) = find(&m.ctr.name) else {
                continue;
            };
            match resize::container_resize(&m.ctr.spec, &new) {
                ContainerResize::Unchanged => {}
                ContainerResize::InPlace => in_place.push(i),
                ContainerResize::Restart => restarts.push(i),
            }
            m.ctr.spec.resources = new.resources.clone();
            m.ctr.spec.resize_policy = new.resize_policy.clone();
        }
        let pod_first = resize::pod_first(old, &spec, "memory");
        let mut errors = Vec::new();
        if pod_first {
            errors.extend(self.resize_pod_cgroup(&spec).err());
        }
        for i in in_place {
            if self.st.containers[i].is_active() {
                errors.extend(self.resize_container(i).err());
            }
        }
        if !pod_first {
            errors.extend(self.resize_pod_cgroup(&spec).err());
        }
        let now = self.now();
        let grace = self.cfg.plan.grace_seconds.saturating_mul(1000);
        for i in restarts {
            self.st.kill_container(&self.cfg.plan, i, grace, now);
        }
        if let Some(e) = errors.into_iter().next() {
            crate::log::warn(&format!("resize: {e}"));
            self.st.resize_error = Some(e);
        }
    }

    /// The pod cgroup's limits from the resized spec.
    fn resize_pod_cgroup(&self, spec: &PodSpec) -> Result<(), String> {
        let limits = crate::pod::resources::pod_limits(spec);
        let json = crate::pod::resources::pod_cgroup_json(
            &limits,
            crate::pod::resources::pod_cpu_shares(spec),
        );
        let r: oci_spec::runtime::LinuxResources = crate::tracked::deserialize(&json)
            .map_err(|(_, e)| format!("pod cgroup limits: {e}"))?;
        let group = self.cfg.cgroups.group(&self.cfg.pod_cgroup);
        if let Some(limit) = r.memory().as_ref().and_then(|m| m.limit()) {
            below_usage(&group, limit, "pod")?;
        }
        group
            .set(&r)
            .map_err(|e| format!("setting the pod cgroup's limits: {e}"))
    }

    /// Container `i`'s cgroup in place, from its resized spec.
    fn resize_container(&self, i: usize) -> Result<(), String> {
        let ctr = &self.containers[i].ctr;
        let r = crate::spec::container_resources(&ctr.spec)
            .map_err(|e| format!("container {}: {e}", ctr.name))?;
        if let Some(limit) = r.memory().as_ref().and_then(|m| m.limit()) {
            below_usage(&ctr.cgroup, limit, &format!("container {}", ctr.name))?;
        }
        ctr.cgroup
            .set(&r)
            .map_err(|e| format!("container {}: setting its cgroup's limits: {e}", ctr.name))
    }
}

/// kubelet refuses a memory limit below what the cgroup uses now.
fn below_usage(group: &crate::cgroup::Group, limit: i64, what: &str) -> Result<(), String> {
    let usage = group
        .dirs()
        .iter()
        .flat_map(|d| [d.join("memory.current"), d.join("memory.usage_in_bytes")])
        .find_map(|f| std::fs::read_to_string(f).ok())
        .and_then(|s| s.trim().parse::<i64>().ok());
    match usage {
        Some(u) if limit < u => Err(format!(
            "attempting to set {what} memory limit ({limit}) below its current usage ({u})"
        )),
        _ => Ok(()),
    }
}
