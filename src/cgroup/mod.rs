//! The cgroup floor: cgroups through cgroups-rs's `fs` API, on cgroup v1, hybrid and v2,
//! for every front-end (a pod under `podinit run`, `podinit runc`, the shim). It knows
//! cgroups and nothing of pods, manifests or supervisors: it stands on `sys` alone.
//!
//! `podinit run` lays its groups out so, always below the parent cgroup
//! (`--cgroup-parent`, default: the cgroup podinit was started in, per controller on v1):
//! ```text
//! <parent>/podinit_<ns>_<name>/            the pod cgroup (pod-level limits)
//!                              c_<name>/   one per container
//! <parent>/podinit_<ns>_<name>_supervisor/ the supervisor's leaf (PID-1 mode: <parent>/supervisor)
//! ```
//! A restart that finds its container's cgroup still busy moves on to `c_<name>.<n>`
//! (`Group::renew`). The runc front-end places a container by its `cgroupsPath`
//! (`oci_path`, runc's rules).
//! Pitfall avoided (docs/architecture.md §3): cgroups-rs places a cgroup at the root of every v1
//! hierarchy unless it is given each controller's path, so every handle here is made with
//! the per-controller parent paths read from `/proc/self/cgroup`.
//!
//! One module a job: `detect` finds the hierarchies and the parent, `group` makes a
//! cgroup in every hierarchy and places processes in it, `oci_path` follows runc's
//! `cgroupsPath` rules, `recorded` finds a runc container's cgroup again from its state, `removal` kills and removes, `resources` writes the spec's
//! limits, `devices` its device rules, `freezer` freezes and thaws, `stats` reads the
//! figures.

mod detect;
mod devices;
mod error;
mod freezer;
mod group;
mod oci_path;
pub mod recorded;
mod removal;
mod resources;
mod stats;
pub mod systemd;

pub use detect::CgroupRoot;
pub use error::{Error, Result};
pub use group::Group;
pub use resources::V2_DELEGATION;
pub use stats::{Memory, MemoryEntry, Pids, StatsReader, Throttling, Usage};

/// `what` failed because of `e`: a kernel's error (errno kept), a sentence, or an error of
/// the layer with `what` said in front.
fn err(what: &str, e: impl error::Cause) -> Error {
    e.within(what)
}

/// `what` needs what the cgroup lacks.
fn missing(what: &str, why: impl Into<String>) -> Error {
    Error::Missing {
        what: what.to_string(),
        why: why.into(),
    }
}
