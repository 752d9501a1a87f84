//! The pod's phase: kubelet's `getPhase` (docs/semantics.md §Phase); a terminal phase, once
//! reached, never changes.

use super::plan::{Kind, PodPlan, RestartPolicy};
use super::state::{Phase, PodPhase, PodState, State};

pub fn phase(plan: &PodPlan, st: &PodState) -> PodPhase {
    if let Some(t) = st.terminal {
        return t;
    }
    let (mut pending_init, mut failed_init) = (0, 0);
    let (mut running, mut stopped, mut succeeded, mut waiting) = (0, 0, 0, 0);
    for (p, c) in plan.containers.iter().zip(&st.containers) {
        let earlier_failure = c.last_termination().is_some_and(|t| !t.succeeded());
        let has_earlier = c.last_state.is_some();
        let is_running = c.phase == Phase::Running;
        match (p.kind, &c.state) {
            (Kind::Init, _) if is_running => pending_init += 1,
            (Kind::Init, State::Terminated(t)) => {
                if !t.succeeded() {
                    failed_init += 1;
                }
            }
            (Kind::Init, State::Waiting { .. }) => {
                if earlier_failure {
                    failed_init += 1;
                } else {
                    pending_init += 1;
                }
            }
            (Kind::Sidecar, _) if is_running => {
                running += 1;
                if !c.started {
                    pending_init += 1;
                }
            }
            (Kind::Sidecar, State::Terminated(_)) => {}
            (Kind::Sidecar, State::Waiting { .. }) => {
                if !has_earlier {
                    pending_init += 1;
                }
            }
            (Kind::App, _) if is_running => running += 1,
            (Kind::App, State::Terminated(t)) => {
                stopped += 1;
                if t.succeeded() {
                    succeeded += 1;
                }
            }
            (Kind::App, State::Waiting { .. }) => {
                if has_earlier {
                    stopped += 1;
                } else {
                    waiting += 1;
                }
            }
            (Kind::Ephemeral, _) | (_, State::Running { .. }) => {}
        }
    }
    let policy = plan.restart_policy;
    if failed_init > 0 && policy == RestartPolicy::Never {
        return PodPhase::Failed;
    }
    if (pending_init > 0 && !st.app_started) || waiting > 0 {
        return PodPhase::Pending;
    }
    if running > 0 {
        return PodPhase::Running;
    }
    if stopped > 0 {
        return match policy {
            RestartPolicy::Always => PodPhase::Running,
            _ if stopped == succeeded => PodPhase::Succeeded,
            RestartPolicy::Never => PodPhase::Failed,
            RestartPolicy::OnFailure => PodPhase::Running,
        };
    }
    PodPhase::Pending
}
