//! The pod's phase: kubelet's `getPhase` (docs/semantics.md §Phase); a terminal phase, once
//! reached, never changes.

use super::plan::{Kind, PodPlan};
use super::state::{Phase, PodPhase, PodState, State};

pub fn phase(plan: &PodPlan, st: &PodState) -> PodPhase {
    if let Some(t) = st.terminal {
        return t;
    }
    // A restart of every container keeps the pod Pending until its apps run again.
    if st.restarting_all.is_some() {
        return PodPhase::Pending;
    }
    let (mut pending_init, mut failed_init) = (0, 0);
    let mut will_restart = 0;
    let (mut running, mut stopped, mut succeeded, mut waiting) = (0, 0, 0, 0);
    for (p, c) in plan.containers.iter().zip(&st.containers) {
        let earlier_failure = c.last_termination().is_some_and(|t| !t.succeeded());
        let has_earlier = c.last_state.is_some();
        let is_running = c.phase == Phase::Running;
        if c.rerun {
            match p.kind {
                Kind::App => waiting += 1,
                Kind::Init | Kind::Sidecar => pending_init += 1,
                Kind::Ephemeral => {}
            }
            continue;
        }
        // An init container's failure fails the pod only when it may not restart
        // (kubelet's `IsContainerRestartable`).
        let restartable = super::restart::restartable(plan, p);
        match (p.kind, &c.state) {
            (Kind::Init, _) if is_running => pending_init += 1,
            (Kind::Init, State::Terminated(t)) => {
                if !t.succeeded() && !restartable {
                    failed_init += 1;
                }
            }
            (Kind::Init, State::Waiting { .. }) => {
                if earlier_failure {
                    if !restartable {
                        failed_init += 1;
                    }
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
                if super::restart::should_restart(plan, p, t) {
                    will_restart += 1;
                }
            }
            (Kind::App, State::Waiting { .. }) => {
                if let Some(t) = &c.last_state {
                    stopped += 1;
                    if super::restart::should_restart(plan, p, t) {
                        will_restart += 1;
                    }
                } else {
                    waiting += 1;
                }
            }
            (Kind::Ephemeral, _) | (_, State::Running { .. }) => {}
        }
    }
    if failed_init > 0 {
        return PodPhase::Failed;
    }
    if (pending_init > 0 && !st.app_started) || waiting > 0 {
        return PodPhase::Pending;
    }
    if running > 0 {
        return PodPhase::Running;
    }
    // Every app container has stopped: Running while one of them will restart (by its
    // own policy and rules, else the pod's), else by their exit codes.
    if stopped > 0 {
        return if will_restart > 0 {
            PodPhase::Running
        } else if stopped == succeeded {
            PodPhase::Succeeded
        } else {
            PodPhase::Failed
        };
    }
    PodPhase::Pending
}
