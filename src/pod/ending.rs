//! The pod's end: termination and deletion requests, a failed pod, and the statuses
//! kubelet reports for containers when the pod is gone.

use super::plan::{Kind, PodPlan};
use super::reason::TerminatedReason;
use super::state::{ContainerState, Phase, PodPhase, PodState, State, Terminated, Termination};
use super::Millis;

impl PodState {
    /// The pod has ended: the sandbox goes, and, as kubelet's `TerminatePod`, a container
    /// left without a terminated state (waiting in back-off, or never started once the pod
    /// had initialized) is reported as a failure whose status could not be located, so that
    /// nothing describes the pod as more successful than it was.
    pub(super) fn on_pod_ended(&mut self, plan: &PodPlan) {
        self.sandbox_ready = false;
        let unknown = || {
            State::Terminated(Terminated {
                exit_code: 137,
                signal: None,
                reason: TerminatedReason::ContainerStatusUnknown,
                message: Some(
                    "The container could not be located when the pod was terminated".into(),
                ),
                started_at: None,
                finished_at: None,
            })
        };
        let waiting = |c: &ContainerState| matches!(c.state, State::Waiting { .. });
        let inits: Vec<usize> = (0..plan.containers.len())
            .filter(|&i| matches!(plan.containers[i].kind, Kind::Init | Kind::Sidecar))
            .collect();
        let initialized = inits.is_empty()
            || (0..plan.containers.len()).any(|i| {
                plan.containers[i].kind == Kind::App
                    && (self.containers[i].last_state.is_some() || !waiting(&self.containers[i]))
            })
            || inits.last().is_some_and(|&i| {
                let c = &self.containers[i];
                let ok = Terminated::succeeded;
                match plan.containers[i].kind {
                    Kind::Sidecar => c.phase == Phase::Running && c.started,
                    _ => {
                        c.last_state.as_ref().is_some_and(ok)
                            || matches!(&c.state, State::Terminated(t) if ok(t))
                    }
                }
            });
        if initialized {
            for i in 0..plan.containers.len() {
                if plan.containers[i].kind == Kind::App
                    && !matches!(self.containers[i].state, State::Terminated(_))
                {
                    self.containers[i].state = unknown();
                }
            }
        }
        // The init containers that tried to start: all but a trailing run of never-started
        // ones, and always the first.
        let tried = inits
            .iter()
            .rposition(|&i| {
                !waiting(&self.containers[i]) || self.containers[i].last_state.is_some()
            })
            .map_or(inits.len().min(1), |p| p + 1);
        for &i in &inits[..tried] {
            if !matches!(self.containers[i].state, State::Terminated(_)) {
                self.containers[i].state = unknown();
            }
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
