//! The pod's end: termination and deletion requests, a failed pod, and the statuses
//! kubelet reports for containers when the pod is gone.

use super::plan::{Kind, PodPlan};
use super::reason::TerminatedReason;
use super::state::{
    exit_code_succeeded, ContainerState, Phase, PodPhase, PodState, State, Terminated, Termination,
};
use super::Millis;

/// What kubelet's end-of-pod rule reads of one container's status. It is filled from the
/// pod's state, or from a status written before (a lost supervisor's, `run::lost`), so
/// that both follow the one rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EndView {
    pub kind: Kind,
    /// Its state is `waiting`.
    pub waiting: bool,
    /// Its state is `terminated`, with this exit code.
    pub terminated: Option<i32>,
    /// Its last state is `terminated`, with this exit code.
    pub last_terminated: Option<i32>,
    /// It runs and has started (what a sidecar owes the pod's initialization).
    pub running_started: bool,
}

impl EndView {
    /// There is evidence that it started: it is not waiting, or it ran before.
    fn started_once(&self) -> bool {
        !self.waiting || self.last_terminated.is_some()
    }
}

/// kubelet's `hasPodInitialized`: a pod without init containers has; otherwise an app
/// container started once, or the last init container is done (a plain one succeeded, a
/// sidecar runs and has started).
pub fn has_initialized(cs: &[EndView]) -> bool {
    let is_init = |c: &&EndView| matches!(c.kind, Kind::Init | Kind::Sidecar);
    let Some(last) = cs.iter().rfind(is_init) else {
        return true;
    };
    cs.iter().any(|c| c.kind == Kind::App && c.started_once())
        || match last.kind {
            Kind::Sidecar => last.running_started,
            _ => {
                last.last_terminated.is_some_and(exit_code_succeeded)
                    || last.terminated.is_some_and(exit_code_succeeded)
            }
        }
}

/// kubelet's `TerminatePod`: the containers whose status becomes [`status_unknown`] when
/// the pod ends, so that nothing describes the pod as more successful than it was. Those
/// without a terminated state among the app containers, once the pod had initialized
/// (one still waiting for its init containers never tried to start), and among the init
/// containers all but a trailing run of never-started ones, and always the first.
/// Ephemeral containers are no part of the rule.
pub fn lost_at_end(cs: &[EndView]) -> Vec<usize> {
    let not_ended = |i: &usize| cs[*i].terminated.is_none();
    let inits: Vec<usize> = (0..cs.len())
        .filter(|&i| matches!(cs[i].kind, Kind::Init | Kind::Sidecar))
        .collect();
    let tried = inits
        .iter()
        .rposition(|&i| cs[i].started_once())
        .map_or(inits.len().min(1), |p| p + 1);
    let mut lost: Vec<usize> = inits[..tried].iter().copied().filter(not_ended).collect();
    if has_initialized(cs) {
        lost.extend(
            (0..cs.len())
                .filter(|&i| cs[i].kind == Kind::App)
                .filter(not_ended),
        );
    }
    lost.sort_unstable();
    lost
}

/// What kubelet reports for a container it could not locate when the pod ended.
pub fn status_unknown() -> Terminated {
    Terminated {
        exit_code: 137,
        signal: None,
        reason: TerminatedReason::ContainerStatusUnknown,
        message: Some("The container could not be located when the pod was terminated".into()),
        started_at: None,
        finished_at: None,
    }
}

impl PodState {
    /// The pod has ended: the sandbox goes, and the containers [`lost_at_end`] names
    /// (waiting in back-off, or never started once the pod had initialized) are reported
    /// as [`status_unknown`].
    pub(super) fn on_pod_ended(&mut self, plan: &PodPlan) {
        self.sandbox_ready = false;
        let views: Vec<EndView> = (0..plan.containers.len())
            .map(|i| end_view(plan.containers[i].kind, &self.containers[i]))
            .collect();
        for i in lost_at_end(&views) {
            self.containers[i].state = State::Terminated(status_unknown());
        }
    }

    /// Terminate the pod: SIGTERM/SIGINT, the API, `podinit stop`, the deadline, or its
    /// natural completion. `grace_secs` overrides the pod's grace period but can only
    /// shrink it; 0 forces (SIGKILL at once, no hooks).
    pub fn request_termination(&mut self, plan: &PodPlan, now: Millis, grace_secs: Option<u64>) {
        let grace_ms = grace_secs
            .unwrap_or(plan.grace_seconds)
            .saturating_mul(1000);
        match &mut self.terminating {
            Some(t) => {
                // Only shrink: the new deadline replaces the old one if it is earlier.
                let end = now + grace_ms;
                if end < t.since + t.grace_ms {
                    t.grace_ms = end - t.since;
                    for c in &mut self.containers {
                        if let Some(s) = &mut c.stopping {
                            s.grace_ms = s.grace_ms.min(end.saturating_sub(s.since));
                            if let Some(k) = s.kill_at {
                                s.kill_at = Some(k.min(end.max(now)));
                            }
                        }
                    }
                }
            }
            None => {
                self.terminating = Some(Termination {
                    since: now,
                    grace_ms,
                });
                for c in &mut self.containers {
                    c.restart_at = None;
                }
            }
        }
        for i in 0..self.containers.len() {
            self.refresh_container(plan, i);
        }
    }

    /// SIGTERM or SIGINT reached the supervisor: the grace of the deletion it asks for.
    /// The first uses the pod's grace period; any later one forces (grace 0), as a second
    /// Ctrl-C does for a foreground program.
    pub fn on_stop_signal(&mut self) -> Option<u64> {
        self.stop_signals += 1;
        (self.stop_signals > 1).then_some(0)
    }

    /// Delete the pod: terminate it, and record the deletion as the API server does (a
    /// later request may only bring it forward). Returns whether the record changed.
    pub fn request_deletion(
        &mut self,
        plan: &PodPlan,
        now: Millis,
        grace_secs: Option<u64>,
    ) -> bool {
        let grace = grace_secs.unwrap_or(plan.grace_seconds);
        let at = now + grace.saturating_mul(1000);
        let changed = self.deletion.is_none_or(|(end, _)| at < end);
        if changed {
            self.deletion = Some((at, grace));
        }
        self.request_termination(plan, now, grace_secs);
        changed
    }

    /// kubelet's eviction manager evicts the pod (`evictPod`, from
    /// `localStorageEviction`): a Warning `Evicted` event, phase Failed with reason
    /// `Evicted`, and its containers killed at once (grace 0).
    pub fn evict(&mut self, plan: &PodPlan, message: &str, now: Millis) {
        if self.terminal.is_some() {
            return;
        }
        self.push_event(super::step::EventSpec {
            type_: super::EventType::Warning,
            reason: super::EventReason::Evicted,
            message: message.into(),
            container: None,
        });
        self.terminal = Some(PodPhase::Failed);
        self.reason = Some(super::EventReason::Evicted.as_str().into());
        self.message = Some(message.into());
        self.request_termination(plan, now, Some(0));
    }

    /// Fail the pod with a reason (e.g. `DeadlineExceeded`) and terminate it.
    pub fn fail(&mut self, plan: &PodPlan, reason: &str, message: &str, now: Millis) {
        if self.terminal.is_none() {
            self.terminal = Some(PodPhase::Failed);
            self.reason = Some(reason.into());
            self.message = Some(message.into());
        }
        self.request_termination(plan, now, None);
    }
}

/// What the end rule reads of a container of the pod's state.
fn end_view(kind: Kind, c: &ContainerState) -> EndView {
    EndView {
        kind,
        waiting: matches!(c.state, State::Waiting { .. }),
        terminated: match &c.state {
            State::Terminated(t) => Some(t.exit_code),
            _ => None,
        },
        last_terminated: c.last_state.as_ref().map(|t| t.exit_code),
        running_started: c.phase == Phase::Running && c.started,
    }
}
