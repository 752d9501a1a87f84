//! `step`: what to do next, as a pure function of plan, observed state and time
//! (kubelet's `computePodActions`).

use super::plan::PodPlan;
use super::state::PodState;
use super::Millis;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventSpec {
    /// `Normal` or `Warning`.
    pub type_: &'static str,
    pub reason: String,
    pub message: String,
    /// The container it is about (index into `plan.containers`), or the pod.
    pub container: Option<usize>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Create and start container `i` (first start or restart; backoff already elapsed).
    Start(usize),
    /// Run container `i`'s preStop hook (termination or liveness kill).
    RunPreStop(usize),
    /// Send container `i` its stop signal.
    Stop(usize),
    /// SIGKILL container `i` (its whole cgroup).
    Kill(usize),
    /// Call `step` again at this time even if nothing is observed before.
    WakeAt(Millis),
    /// Every container has ended and the pod is terminal: tear down and exit.
    Finish,
    /// Emit an event.
    Event(EventSpec),
}

/// What to do now. `step` records its decisions in `state` (a started container is
/// marked as being created, an emitted event is not emitted again), so calling it twice
/// at the same time returns nothing new the second time.
pub fn step(_plan: &PodPlan, _state: &mut PodState, _now: Millis) -> Vec<Action> {
    todo!("implemented in pod/step.rs")
}
