//! The pod's decisions, as pure code: no syscalls, no clock reads.
//!
//! The supervisor owns one [`PodState`], feeds it observations through its `on_*` methods
//! (each takes `now`), and asks [`step`] what to do next. Every rule of SEMANTICS.md
//! (ordering, sidecars, restarts and back-off, termination order, phase, conditions) lives
//! here and is unit-tested with time as a parameter.

pub mod backoff;
pub mod conditions;
mod ending;
pub mod events;
pub mod log_run;
mod observe;
pub mod oom_score;
pub mod phase;
pub mod plan;
pub mod probes;
pub mod reason;
pub mod resources;
pub mod restart;
pub mod state;
pub mod step;
pub mod termination;
#[cfg(test)]
mod tests;

pub use phase::phase;
pub use plan::{ContainerPlan, Kind, PodPlan, RestartPolicy};
pub use reason::{EventReason, EventType, QosClass, StartFailure, TerminatedReason, WaitingReason};
pub use state::{ContainerState, Exit, PodPhase, PodState, State, Terminated};
pub use step::{step, Action, EventSpec};

/// Monotonic milliseconds since the supervisor started. Wall-clock times are derived only
/// when status is rendered (`status` module), from the wall time at millisecond 0.
pub type Millis = u64;
