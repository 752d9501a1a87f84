//! `PATCH /v1/pod/resize`: the API server's part (`pod::resize::patched`), then kubelet's:
//! the allocation against the node's allocatable and what the pods beside it under the
//! state root hold (`pod::allocation`: `Infeasible`, `Deferred` and its retries), and the
//! new sizes on the cgroups in kubelet's order (`doPodResizeAction`): the pod's cgroup
//! first when its memory limit grows, last when it shrinks; each container by its
//! `resizePolicy`, in place or by a restart; never a memory limit below what the cgroup
//! uses now. `PodResizeInProgress` lasts until the cgroups read back what was allocated.

use super::api::{error, line};
use super::error::{Error, Result};
use super::Supervisor;
use crate::api::http::Request;
use crate::api::server::Reply;
use crate::api::Error as ApiError;
use crate::pod::allocation;
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
        let changed = new.spec != self.cfg.pod.spec;
        self.cfg.plan.generation = new.metadata.generation.unwrap_or(1);
        self.cfg.pod = new;
        if changed {
            self.status.pod_changed();
            self.handle_resize();
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

    /// The pod's spec at the sizes kubelet allocated: each container's resources as its
    /// record has them, the pod-level ones as allocated.
    fn allocated_spec(&self) -> PodSpec {
        let mut spec = self.cfg.pod.spec.clone().unwrap_or_default();
        let of = |name: &str| {
            self.containers
                .iter()
                .find(|m| m.ctr.name == name)
                .map(|m| m.ctr.allocated.clone())
        };
        for c in spec
            .containers
            .iter_mut()
            .chain(spec.init_containers.iter_mut().flatten())
        {
            if let Some(r) = of(&c.name) {
                c.resources = r;
            }
        }
        spec.resources = self.pod_allocated.clone();
        spec
    }

    /// kubelet's `handlePodResourcesResize`: allocate the desired sizes if the node has
    /// room for them (then apply them), else say why the resize is pending.
    pub(super) fn handle_resize(&mut self) {
        let desired = self.cfg.pod.spec.clone().unwrap_or_default();
        let old = self.allocated_spec();
        if old == desired {
            self.st.resize_pending = None;
            return;
        }
        let (cpu, mem) = self.cfg.node_allocatable;
        let node = allocation::CpuMemory {
            cpu: i128::from(cpu),
            memory: i128::from(mem),
        };
        let generation = self.cfg.plan.generation;
        let held = allocation::cpu_memory(&allocation::node_usage(&self.sd.other_pods()));
        if let Err((why, msg)) = allocation::admit(&desired, node, held) {
            // An event only when the condition changes, as `SetPodResizePendingCondition`.
            if self.st.resize_pending.as_ref() != Some(&(why, msg.clone())) {
                self.event(allocation::pending(&desired, generation, why, &msg));
            }
            self.st.resize_pending = Some((why, msg));
            if why == allocation::Pending::Deferred {
                self.retry_resize_later();
            }
            return;
        }
        self.st.resize_pending = None;
        self.st.resize_error = None;
        self.st.resize_in_progress = true;
        self.event(allocation::started(&desired, generation));
        self.pod_allocated = desired.resources.clone();
        self.apply_resize(&old, &desired);
    }

    fn retry_resize_later(&mut self) {
        let at = allocation::next_retry(self.now());
        self.resize_retry_at = Some(at);
        self.wake.insert(at);
    }

    /// Each turn of the loop: a deferred resize retried when the ticker is due (a failed
    /// one applied again), and an allocated one checked against what the cgroups now have.
    pub(super) fn sync_resize(&mut self) {
        if self.resize_retry_at.is_some_and(|t| t <= self.now()) {
            self.resize_retry_at = None;
            match &self.st.resize_pending {
                Some((allocation::Pending::Deferred, _)) => self.handle_resize(),
                _ if self.st.resize_error.is_some() => {
                    let spec = self.allocated_spec();
                    self.apply_resize(&spec, &spec);
                }
                _ => {}
            }
        }
        if !self.st.resize_in_progress {
            return;
        }
        let mut all_match = true;
        for i in 0..self.containers.len() {
            if !matches!(
                self.st.containers[i].state,
                crate::pod::State::Running { .. }
            ) {
                continue;
            }
            let m = &mut self.containers[i];
            let v = read_back(&m.ctr.cgroup);
            m.observed = Some(v);
            let alloc = m.ctr.allocated.clone().unwrap_or_default();
            all_match &= allocation::matches(&alloc, &allocation::actual(&alloc, &v));
        }
        if all_match && self.st.resize_error.is_none() {
            self.st.resize_in_progress = false;
            let spec = self.allocated_spec();
            self.event(allocation::completed(&spec, self.cfg.plan.generation));
        }
    }

    /// The sizes just allocated (`spec`) on the cgroups in kubelet's order
    /// (`doPodResizeAction`), from those allocated before (`old`).
    fn apply_resize(&mut self, old: &PodSpec, spec: &PodSpec) {
        let find = |s: &'_ PodSpec, name: &str| -> Option<Container> {
            s.containers
                .iter()
                .chain(s.init_containers.iter().flatten())
                .find(|c| c.name == name)
                .cloned()
        };
        let (mut in_place, mut restarts) = (Vec::new(), Vec::new());
        for (i, m) in self.containers.iter_mut().enumerate() {
            let Some(new) = find(spec, &m.ctr.name) else {
                continue;
            };
            let before = find(old, &m.ctr.name).unwrap_or_default();
            match resize::container_resize(&before, &new) {
                // A retry after an error writes every running container's values again.
                ContainerResize::Unchanged if self.st.resize_error.is_some() => in_place.push(i),
                ContainerResize::Unchanged => {}
                ContainerResize::InPlace => in_place.push(i),
                ContainerResize::Restart => restarts.push(i),
            }
            m.ctr.allocated = new.resources;
        }
        let pod_first = resize::pod_first(old, spec, "memory");
        let mut errors = Vec::new();
        if pod_first {
            errors.extend(self.resize_pod_cgroup(spec).err());
        }
        for i in in_place {
            if self.st.containers[i].is_active() {
                errors.extend(self.resize_container(i).err());
                // The status written with this generation shows what the cgroup now
                // holds, as kubelet's next sync reads it from the runtime.
                self.containers[i].observed = Some(read_back(&self.containers[i].ctr.cgroup));
            }
        }
        if !pod_first {
            errors.extend(self.resize_pod_cgroup(spec).err());
        }
        let now = self.now();
        let grace = self.cfg.plan.grace_seconds.saturating_mul(1000);
        for i in restarts {
            self.st.kill_container(&self.cfg.plan, i, grace, now);
        }
        match errors.into_iter().next().map(|e| e.to_string()) {
            Some(e) => {
                crate::log::warn(&format!("resize: {e}"));
                let generation = self.cfg.plan.generation;
                self.event(allocation::error(spec, generation, &e));
                self.st.resize_error = Some(e);
                // kubelet retries a failed resize at its next sync of the pod.
                self.retry_resize_later();
            }
            None => self.st.resize_error = None,
        }
    }

    /// The pod cgroup's limits from the resized spec.
    fn resize_pod_cgroup(&self, spec: &PodSpec) -> Result<()> {
        let limits = crate::pod::resources::pod_limits(spec);
        let json = crate::pod::resources::pod_cgroup_json(
            &limits,
            crate::pod::resources::pod_cpu_shares(spec),
        );
        let r: oci_spec::runtime::LinuxResources =
            crate::tracked::deserialize(&json).map_err(|(_, e)| Error::Internal {
                what: "pod cgroup limits".into(),
                why: e.to_string(),
            })?;
        let group = self.cfg.cgroups.group(&self.cfg.pod_cgroup);
        if let Some(limit) = r.memory().as_ref().and_then(|m| m.limit()) {
            below_usage(&group, limit, "pod")?;
        }
        // Under systemd the slice's properties first (as runc's update), or systemd would
        // write the old limits back over the files at its next reload.
        if let Some(s) = &self.cfg.scopes {
            crate::cgroup::systemd::set(s.slice(), &r, None)?;
        }
        group
            .set(&r)
            .map_err(|e| Error::from(e).within("setting the pod cgroup's limits"))
    }

    /// Container `i`'s cgroup in place, at its allocated resources.
    fn resize_container(&self, i: usize) -> Result<()> {
        let ctr = &self.containers[i].ctr;
        let of = |e: Error| e.of_container(&ctr.name);
        let r = crate::spec::container_resources(&ctr.allocated_spec(self.cfg.pod_spec()))
            .map_err(|e| of(e.into()))?;
        if let Some(limit) = r.memory().as_ref().and_then(|m| m.limit()) {
            below_usage(&ctr.cgroup, limit, &format!("container {}", ctr.name))?;
        }
        if let Some(unit) = &ctr.scope {
            crate::cgroup::systemd::set(unit, &r, None).map_err(|e| of(e.into()))?;
        }
        ctr.cgroup
            .set(&r)
            .map_err(|e| of(Error::from(e).within("setting its cgroup's limits")))
    }
}

/// kubelet refuses a memory limit below what the cgroup uses now.
fn below_usage(group: &crate::cgroup::Group, limit: i64, what: &str) -> Result<()> {
    let usage = group
        .dirs()
        .iter()
        .flat_map(|d| [d.join("memory.current"), d.join("memory.usage_in_bytes")])
        .find_map(|f| std::fs::read_to_string(f).ok())
        .and_then(|s| s.trim().parse::<i64>().ok());
    match usage {
        Some(usage) if limit < usage => Err(Error::BelowUsage {
            what: what.to_string(),
            limit,
            usage,
        }),
        _ => Ok(()),
    }
}

/// A cgroup's CPU and memory values as kubelet's runtime reports them back, from
/// whichever of v1's and v2's files the group has.
pub(super) fn read_back(group: &crate::cgroup::Group) -> allocation::CgroupValues {
    let read = |name: &str| {
        group
            .dirs()
            .iter()
            .find_map(|d| std::fs::read_to_string(d.join(name)).ok())
            .map(|s| s.trim().to_string())
    };
    let num = |name: &str| read(name).and_then(|s| s.parse::<i64>().ok());
    // v1 says "unlimited" with a huge page-aligned number.
    let limit = |v: i64| (v > 0 && v < (1 << 62)).then_some(v);
    let mut v = allocation::CgroupValues {
        cpu_quota: num("cpu.cfs_quota_us").filter(|q| *q > 0),
        cpu_period: num("cpu.cfs_period_us").map(|p| p as u64),
        cpu_shares: num("cpu.shares").map(|s| s as u64),
        cpu_weight: None,
        memory_limit: num("memory.limit_in_bytes").and_then(limit),
    };
    if let Some(max) = read("cpu.max") {
        let mut f = max.split_whitespace();
        v.cpu_quota = f.next().and_then(|q| q.parse().ok());
        v.cpu_period = f.next().and_then(|p| p.parse().ok());
    }
    if v.cpu_shares.is_none() {
        v.cpu_weight = num("cpu.weight").map(|w| w as u64);
    }
    if let Some(m) = read("memory.max") {
        v.memory_limit = m.parse().ok().and_then(limit);
    }
    v
}
