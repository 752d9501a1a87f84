//! Observed state of the pod and its containers, and the transitions observations cause.
//!
//! INTERFACE CONTRACT (the supervisor relies on it):
//! - `PodState::new(plan)`: every container `Waiting{ContainerCreating|PodInitializing}`.
//! - `on_sandbox_ready(now)`: PodReadyToStartContainers, `start_time`.
//! - `on_started(i, now)`: the process runs (postStart, if any, not yet done).
//! - `on_post_start_done(i, now)`: hook returned (call right after `on_started` if none).
//! - `on_start_failed(i, reason, message, now)`: the process could not be created or
//!   exec'd. `reason` is `CreateContainerError` (before fork: bad spec, cgroup…) or
//!   `StartError` (exec failed: exit 128, terminated.reason StartError).
//! - `on_exited(i, Exit, now)`: the main process ended.
//! - `on_probe(i, ...)`, readiness gates, termination requests: see methods.
//! Restart bookkeeping (restartCount, lastState, backoff) happens in these methods; `step`
//! only reads.

use super::backoff::Backoff;

use super::Millis;
use std::collections::BTreeMap;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Terminated {
    pub exit_code: i32,
    pub signal: Option<i32>,
    pub reason: String,
    pub message: Option<String>,
    pub started_at: Option<Millis>,
    pub finished_at: Millis,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum State {
    Waiting {
        reason: String,
        message: Option<String>,
    },
    Running {
        started_at: Millis,
    },
    Terminated(Terminated),
}

/// How a main process ended, as the supervisor observed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exit {
    /// 0–255 for a normal exit, 128+signal for a signal.
    pub exit_code: i32,
    pub signal: Option<i32>,
    /// The cgroup saw an OOM kill during this run.
    pub oom_killed: bool,
    /// Content of the termination message (already read and truncated), if any.
    pub message: Option<String>,
}

#[derive(Clone, Debug)]
pub struct ContainerState {
    pub state: State,
    pub last_state: Option<Terminated>,
    pub restart_count: u32,
    pub started: bool,
    pub ready: bool,
    /// A process was created at least once.
    pub ever_created: bool,
    /// postStart has returned for the current run.
    pub post_start_done: bool,
    pub backoff: Backoff,
    /// The stop signal was sent at this time (during termination or a kill).
    pub stop_sent_at: Option<Millis>,
    /// SIGKILL was sent.
    pub killed: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GateCondition {
    pub status: bool,
    pub reason: Option<String>,
    pub message: Option<String>,
    pub last_transition: Millis,
}

#[derive(Clone, Debug)]
pub struct Termination {
    pub since: Millis,
    /// Grace period in ms (0 = forced).
    pub grace_ms: u64,
    /// Pod-level reason when the pod is being failed (e.g. `DeadlineExceeded`).
    pub reason: Option<String>,
    pub message: Option<String>,
}

#[derive(Clone, Debug)]
pub struct PodState {
    pub containers: Vec<ContainerState>,
    pub sandbox_ready: bool,
    pub start_time: Option<Millis>,
    pub terminating: Option<Termination>,
    pub gates: BTreeMap<String, GateCondition>,
}
