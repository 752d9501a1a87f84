//! What the unit tests of the opts share: a base, a container from YAML, and a context.

use k8s_openapi::api::core::v1::{Container, PodSpec};
use oci_spec::runtime::Spec;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{Ctx, PodContext, SpecOpt};
use crate::bundle::{Bundle, HostVolume};

/// A bundle with an ENTRYPOINT and CMD, a hostname, a `/data` mount, all namespaces, a
/// cgroups path and a seccomp filter of its own.
pub fn bundle() -> Bundle {
    let spec: Spec = serde_json::from_value(json!({
        "ociVersion": "1.0.2",
        "process": {"args": ["/bin/entry", "default-cmd"], "cwd": "/", "env": ["PATH=/bin", "A=1"],
                    "user": {"uid": 0, "gid": 0},
                    "capabilities": {"bounding": ["CAP_CHOWN", "CAP_NET_RAW"], "effective": ["CAP_CHOWN", "CAP_NET_RAW"],
                                     "permitted": ["CAP_CHOWN", "CAP_NET_RAW"], "inheritable": [], "ambient": []},
                    "noNewPrivileges": false},
        "root": {"path": "rootfs", "readonly": false},
        "hostname": "bundle-host",
        "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"},
                   {"destination": "/data", "type": "tmpfs", "source": "tmpfs"}],
        "linux": {"namespaces": [{"type": "pid"}, {"type": "network"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}],
                  "cgroupsPath": "/x", "seccomp": {"defaultAction": "SCMP_ACT_LOG"}}
    }))
    .unwrap();
    Bundle::of_dir(PathBuf::from("/b"), PathBuf::from("/b/rootfs"), spec)
}

pub fn container(yaml: &str) -> Container {
    serde_yaml_ng::from_str(yaml).unwrap()
}

pub fn pod(yaml: &str) -> PodSpec {
    serde_yaml_ng::from_str(&format!("containers: []\n{yaml}")).unwrap()
}

/// The container's literal `env`, each value expanded against those before it, as
/// `manifest::env` resolves it.
pub fn literal_env(c: &Container) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = Vec::new();
    for e in c.env.iter().flatten() {
        let vars: BTreeMap<String, String> = env.iter().cloned().collect();
        let v = crate::pod::expansion::expand(e.value.as_deref().unwrap_or(""), &vars);
        env.retain(|(k, _)| *k != e.name);
        env.push((e.name.clone(), v));
    }
    env
}

/// The pod's side: a `data` volume at `/host/data`, a termination log, hostname `mypod`.
pub struct Pod {
    pub volumes: BTreeMap<String, HostVolume>,
    pub env: Vec<(String, String)>,
    pub share: bool,
    pub seccomp_root: PathBuf,
    pub recursive_read_only: Vec<bool>,
    pub sub_paths: Vec<Option<String>>,
}

impl Pod {
    pub fn new(c: &Container) -> Pod {
        let mut volumes = BTreeMap::new();
        volumes.insert(
            "data".to_string(),
            HostVolume {
                host_path: PathBuf::from("/host/data"),
                read_only: false,
                made_at: None,
            },
        );
        Pod {
            volumes,
            env: literal_env(c),
            share: false,
            seccomp_root: PathBuf::from("/nonexistent/seccomp"),
            recursive_read_only: Vec::new(),
            sub_paths: Vec::new(),
        }
    }

    pub fn context(&self) -> PodContext<'_> {
        PodContext {
            volumes: &self.volumes,
            termination_log: Some(Path::new("/state/tl")),
            share_process_namespace: self.share,
            hostname: "mypod",
            env: &self.env,
            pod_files: &[],
            oom_score_adj: None,
            seccomp_root: &self.seccomp_root,
            recursive_read_only: &self.recursive_read_only,
            sub_paths: &self.sub_paths,
        }
    }
}

/// One opt on `base`'s spec, in a pod with `pod_spec`.
pub fn try_apply_in(
    opt: SpecOpt,
    base: &Bundle,
    pod_spec: &PodSpec,
    c: &Container,
    p: &Pod,
) -> super::Result<Spec> {
    let cx = p.context();
    let ctx = Ctx {
        base,
        pod: pod_spec,
        container: c,
        cx: &cx,
        vars: cx.env.iter().cloned().collect(),
    };
    let mut spec = base.spec.clone();
    opt(&mut spec, &ctx).map(|()| spec)
}

pub fn apply_on(opt: SpecOpt, base: &Bundle, c: &Container) -> Spec {
    try_apply_in(opt, base, &PodSpec::default(), c, &Pod::new(c)).unwrap()
}

pub fn apply(opt: SpecOpt, c: &Container) -> Spec {
    apply_on(opt, &bundle(), c)
}

pub fn try_apply(opt: SpecOpt, pod_spec: &PodSpec, c: &Container) -> super::Result<Spec> {
    try_apply_in(opt, &bundle(), pod_spec, c, &Pod::new(c))
}

/// The whole pipeline.
pub fn run(c: &Container, pod_spec: &PodSpec, p: &Pod) -> super::Result<Spec> {
    super::for_container(&bundle(), pod_spec, c, &p.context())
}

/// The spec as JSON, for asserting on a few fields.
pub fn json(s: &Spec) -> serde_json::Value {
    serde_json::to_value(s).unwrap()
}

/// A set of capabilities as sorted names.
pub fn names(set: &Option<oci_spec::runtime::Capabilities>) -> Vec<String> {
    let mut v: Vec<String> = set
        .iter()
        .flatten()
        .map(|c| {
            serde_json::to_value(c)
                .unwrap()
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    v.sort();
    v
}

/// The process's capability sets.
pub fn caps_of(s: &Spec) -> oci_spec::runtime::LinuxCapabilities {
    let p = s.process().as_ref().expect("a process");
    p.capabilities().clone().expect("capabilities")
}
