//! The pod's decisions, as pure code: no syscalls, no clock reads.
//!
//! The supervisor owns one [`PodState`], feeds it observations through its `on_*` methods
//! (each takes `now`), and asks [`step`] what to do next: start, stop or kill a container,
//! run a hook or a probe, emit an event, wake up at a time. Every rule of docs/semantics.md
//! (ordering, sidecars, restarts and back-off, termination order, phase, conditions) lives
//! here and is unit-tested with time as a parameter, as do the words kubelet uses
//! (`reason`), its event texts (`events`) and its log-run choice (`log_run`).

pub mod admit;
pub mod allocation;
pub mod attach;
pub mod backoff;
pub mod conditions;
pub mod empty_dir;
pub mod ending;
pub mod events;
pub mod expansion;
pub mod fs_group;
pub mod image_access;
pub mod image_pull;
pub mod log_run;
mod observe;
pub mod oom_score;
pub mod phase;
pub mod plan;
pub mod probes;
pub mod reason;
pub mod recursive_read_only;
pub mod resize;
pub mod resources;
pub mod restart;
pub mod restart_all;
pub mod rootless;
pub mod state;
pub mod step;
pub mod sub_path;
pub mod sysctls;
pub mod termination;
#[cfg(test)]
mod tests;
pub mod userns;
pub mod volume_file;
pub mod volumes;

pub use phase::phase;
pub use plan::{ContainerPlan, Kind, PodPlan, RestartPolicy};
pub use reason::{EventReason, EventType, QosClass, StartFailure, TerminatedReason, WaitingReason};
pub use state::{ContainerState, Exit, PodPhase, PodState, State, Terminated};
pub use step::{step, Action, EventSpec};

/// Add a container to a running pod (an ephemeral one, or one a shim adds): at the end,
/// so the indices of the others do not move; it waits to be started by the next `step`.
/// Returns its index.
pub fn add_container(plan: &mut PodPlan, st: &mut PodState, c: ContainerPlan) -> usize {
    st.push_container(&c);
    plan.containers.push(c);
    plan.containers.len() - 1
}

/// Monotonic milliseconds since the supervisor started. Wall-clock times are derived only
/// when status is rendered (`status` module), from the wall time at millisecond 0.
pub type Millis = u64;
