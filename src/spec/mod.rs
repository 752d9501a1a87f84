//! A container's OCI spec, built from its base by small typed functions, one job each, in
//! the spirit of containerd's `SpecOpts` (`pkg/oci/spec_opts.go`). The base is a bundle's
//! `config.json` or an image's default spec (`bundle`); each [`SpecOpt`] edits the typed
//! `oci_spec::Spec` in place, and no step goes through JSON.
//!
//! The front-ends share this layer: the supervisor builds each container of a pod with
//! [`for_container`] (regular, init, sidecar and ephemeral containers alike); `podinit
//! runc create` and the shim read `config.json` once with [`load`]; all of them derive
//! the device cgroup's rules with [`cgroup_rules`] (runc's order); the shim turns a CRI
//! sandbox into podinit's pause with [`sandbox`]. Only [`for_container`] and its opts read
//! Kubernetes objects.
//!
//! # How a container is laid over its base
//!
//! The base's spec, then, from the pod's container (one opt each, in this order):
//! - **env** (`env`): the base's env, then the container's resolved `env` in order, each
//!   replacing a variable of the same name (kubelet expands `$(VAR)` in values,
//!   `manifest::env`). `HOSTNAME` is the pod's hostname unless the container sets it;
//!   `PATH` defaults to the usual one when the base has none.
//! - **command / args** (`process`; the bundle's `process.args[0]` plays the image
//!   ENTRYPOINT, the rest its CMD; an image of the store has its own Entrypoint and Cmd):
//!   neither → the base's args; `command` only → `command`; `args` only → the ENTRYPOINT
//!   followed by `args`; both → `command` + `args`. `$(VAR)` references to the container's
//!   env are expanded (`pod::expansion`).
//! - **workingDir** replaces `process.cwd`; kubelet's OOM score sets `oomScoreAdj`; `tty`
//!   sets `process.terminal` (`process`).
//! - **securityContext** (container over pod, `security`): `runAsUser`/`runAsGroup` set the
//!   user (a uid alone takes its primary group and groups from the rootfs' `/etc/passwd`
//!   and `/etc/group`), `supplementalGroups` and `fsGroup` are added; `runAsNonRoot`
//!   refuses a uid 0; `capabilities.add`/`drop` change the bounding, effective and
//!   permitted sets (`ALL` allowed, names with or without `CAP_`);
//!   `readOnlyRootFilesystem` sets `root.readonly`; `allowPrivilegeEscalation` sets
//!   `noNewPrivileges` to its opposite; `privileged` and `procMount: Unmasked` as the
//!   CRI makes them; `seccompProfile` replaces the base's `linux.seccomp` (`seccomp`).
//! - **resources** (`resources`): `limits.cpu` → CFS quota over a 100 ms period (at least
//!   1 ms), `requests.cpu` → shares (kubelet's `MilliCPUToShares`, at least 2),
//!   `limits.memory` → memory limit, `limits.hugepages-<size>` → hugepage limits.
//! - **devices** (`devices`): a privileged container gets the host's device nodes and may
//!   use every device; the cgroup's rules are the spec's then runc's defaults.
//! - **volumeMounts** (`mounts`) are bind mounts (`rbind`, `rprivate`, `nosuid`, `nodev`,
//!   `ro` when `readOnly`, and `rro` when recursively read-only) appended to the base's mounts, replacing one at the same
//!   destination; `subPath` is created inside the volume when missing. The
//!   termination-message file is bind-mounted at `terminationMessagePath`, the pod's
//!   `/etc` files at theirs.
//! - **namespaces** (`namespaces`): network, ipc and uts are the pod's (removed from the
//!   spec; the container process inherits them), so is pid with `shareProcessNamespace`;
//!   otherwise the container gets its own pid namespace. A user namespace, or a namespace
//!   `path`, is refused.
//! - **root** (`root`): the base's root filesystem; `hostname`, `domainname` and
//!   `linux.cgroupsPath` are dropped (the pod's UTS namespace and podinit's cgroups apply).

mod devices;
mod env;
mod error;
mod load;
mod mounts;
mod namespaces;
pub mod pod_files;
mod process;
mod resources;
pub use resources::container_resources;
mod root;
pub mod sandbox;
mod seccomp;
mod seccomp_default;
mod security;

pub use devices::cgroup_rules;
pub use error::{Error, Result};
pub use load::{annotations, load, LoadError};

use k8s_openapi::api::core::v1::{Container, PodSpec};
use oci_spec::runtime::{Linux, LinuxResources, Process, Root, Spec};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::bundle::{Bundle, HostVolume};

/// One step of a container's spec: a typed edit of the spec from what `Ctx` holds. An
/// error is the step's own; [`for_container`] names the container and the field.
pub type SpecOpt = fn(&mut Spec, &Ctx) -> Result<()>;

/// What the pod gives every container's spec.
pub struct PodContext<'a> {
    /// Volume name → where it is on the host.
    pub volumes: &'a BTreeMap<String, HostVolume>,
    /// Host file bind-mounted at the container's `terminationMessagePath`.
    pub termination_log: Option<&'a Path>,
    pub share_process_namespace: bool,
    /// The pod's hostname (`HOSTNAME`).
    pub hostname: &'a str,
    /// The container's environment, resolved and expanded as kubelet does
    /// (`manifest::env`).
    pub env: &'a [(String, String)],
    /// The pod's files bind-mounted at these destinations (`/etc/hosts`,
    /// `/etc/resolv.conf`) unless the container mounts something there itself.
    pub pod_files: &'a [(PathBuf, &'static str)],
    /// kubelet's OOM score for the container (`pod::oom_score`), over the base's.
    pub oom_score_adj: Option<i32>,
    /// Where `Localhost` seccomp profiles are (`--seccomp-root`, kubelet's
    /// `<root-dir>/seccomp`).
    pub seccomp_root: &'a Path,
    /// For each of the container's `volumeMounts`, whether it is recursively read-only
    /// (`pod::recursive_read_only`, resolved against the kernel); missing ones are not.
    pub recursive_read_only: &'a [bool],
    /// For each of the container's `volumeMounts`, its sub-path with `subPathExpr`
    /// expanded (`pod::sub_path`); where missing, the mount's `subPath` as written.
    pub sub_paths: &'a [Option<String>],
}

/// What every opt of a pod's container reads.
pub struct Ctx<'a> {
    pub base: &'a Bundle,
    pub pod: &'a PodSpec,
    pub container: &'a Container,
    pub cx: &'a PodContext<'a>,
    /// The container's own variables, which `$(VAR)` in `command` and `args` refer to.
    pub vars: BTreeMap<String, String>,
}

impl Ctx<'_> {
    /// `securityContext.privileged` of the container.
    pub fn privileged(&self) -> bool {
        self.container
            .security_context
            .as_ref()
            .and_then(|s| s.privileged)
            .unwrap_or(false)
    }
}

/// A pod container's opts, in order, each with the field its errors are reported under
/// (`None`: the message names its field itself). Later opts see what earlier ones made:
/// the command expands against the final env, the default seccomp profile follows the
/// final capabilities.
const POD_CONTAINER: &[(Option<&str>, SpecOpt)] = &[
    (None, env::with_env),
    (Some("command"), process::with_args),
    (None, process::with_process),
    (Some("image"), security::with_image_user),
    (Some("securityContext"), security::with_user),
    (Some("securityContext"), security::with_capabilities),
    (Some("securityContext"), security::with_root_and_privileges),
    (Some("resources"), resources::with_resources),
    (None, security::with_privileged),
    (None, security::with_proc_mount),
    (None, seccomp::with_seccomp),
    (None, devices::with_privileged_devices),
    (None, mounts::with_mounts),
    (
        Some("config.json: linux.namespaces"),
        namespaces::with_pod_namespaces,
    ),
    (None, root::with_base_root),
];

/// The effective OCI spec of `c` on its base. Errors name the container and the field.
pub fn for_container(base: &Bundle, pod: &PodSpec, c: &Container, cx: &PodContext) -> Result<Spec> {
    let ctx = Ctx {
        base,
        pod,
        container: c,
        cx,
        vars: cx.env.iter().cloned().collect(),
    };
    let mut spec = base.spec.clone();
    for (field, opt) in POD_CONTAINER {
        opt(&mut spec, &ctx).map_err(|e| Error::Container {
            name: c.name.clone(),
            field: *field,
            err: Box::new(e),
        })?;
    }
    Ok(spec)
}

/// The spec's process; a base has one (`bundle::load` and the image's spec see to it).
fn process_mut(spec: &mut Spec) -> Result<&mut Process> {
    spec.process_mut()
        .as_mut()
        .ok_or_else(|| Error::Invalid("config.json: process: Required value".to_string()))
}

/// `spec.linux`, made with nothing set when the base has none (`Linux::default()` is
/// youki's defaults: namespaces, masked paths).
fn linux_mut(spec: &mut Spec) -> &mut Linux {
    spec.linux_mut().get_or_insert_with(|| {
        let mut l = Linux::default();
        l.set_resources(None);
        l.set_namespaces(None);
        l.set_masked_paths(None);
        l.set_readonly_paths(None);
        l
    })
}

/// `linux.resources`, made with nothing set when missing.
fn resources_mut(spec: &mut Spec) -> &mut LinuxResources {
    linux_mut(spec)
        .resources_mut()
        .get_or_insert_with(LinuxResources::default)
}

/// `spec.root`, made with only a path when missing (`Root::default()` is read-only).
fn root_mut(spec: &mut Spec) -> &mut Root {
    spec.root_mut().get_or_insert_with(|| {
        let mut r = Root::default();
        r.set_readonly(None);
        r
    })
}

#[cfg(test)]
pub(crate) mod testing;

#[cfg(test)]
mod tests;
