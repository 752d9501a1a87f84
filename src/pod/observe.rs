//! Observations: what the supervisor saw (a start, an exit, a probe or hook result) and
//! the bookkeeping it causes (restartCount, lastState, back-off). Decisions about what to
//! do next are `step`'s.

use super::plan::{Kind, PodPlan};
use super::probes::Due;
use super::reason::{EventReason, EventType, StartFailure, TerminatedReason, WaitingReason};
use super::restart;
use super::state::{
    exit_code_succeeded, Exit, GateCondition, HookRun, Phase, PodState, State, Stopping, Terminated,
};
use super::step::EventSpec;
use super::Millis;

impl PodState {
    pub fn on_sandbox_ready(&mut self, now: Millis) {
        self.sandbox_ready = true;
        self.start_time.get_or_insert(now);
    }

    /// `step` decided to start container `i`.
    pub(super) fn mark_creating(&mut self, plan: &PodPlan, i: usize) {
        let c = &mut self.containers[i];
        if c.ever_created {
            c.restart_count += 1;
        }
        c.phase = Phase::Creating;
        c.rerun = false;
        c.restart_at = None;
        c.stopping = None;
        c.started = false;
        c.ready = false;
        c.post_start_done = false;
        c.post_start_asked = false;
        c.post_start_error = None;
        c.startup_ok = false;
        c.readiness_ok = false;
        if let State::Terminated(t) = &c.state {
            c.last_state = Some(t.clone());
        }
        c.state = State::Waiting {
            reason: if matches!(plan.containers[i].kind, Kind::App | Kind::Ephemeral) {
                WaitingReason::ContainerCreating
            } else {
                WaitingReason::PodInitializing
            },
            message: None,
        };
        if plan.containers[i].kind == Kind::App {
            self.app_started = true;
        }
    }

    /// The container's process runs (its postStart, if any, has not returned yet: until
    /// then the API still shows it waiting; `step` asks for it).
    pub fn on_started(&mut self, plan: &PodPlan, i: usize, now: Millis) {
        let name = plan.containers[i].name.clone();
        let c = &mut self.containers[i];
        c.phase = Phase::Running;
        c.ever_created = true;
        c.state = State::Running { started_at: now };
        self.event(
            EventType::Normal,
            EventReason::Created,
            format!("Created container {name}"),
            Some(i),
        );
        self.event(
            EventType::Normal,
            EventReason::Started,
            format!("Started container {name}"),
            Some(i),
        );
        self.refresh_container(plan, i);
    }

    /// postStart returned (or there is none): the container counts as started, and its
    /// probes begin, from their initial results.
    pub fn on_post_start_done(&mut self, plan: &PodPlan, i: usize, now: Millis) {
        self.containers[i].post_start_done = true;
        self.refresh_container(plan, i);
        let instance = self.containers[i].restart_count;
        self.probes.container_started(i, instance, now);
    }

    /// A probe `step` asked for (`Action::RunProbe`) has a result (`verdict`, with the
    /// handler's output or error). Returns the events to record now.
    pub fn on_probe_result(
        &mut self,
        plan: &PodPlan,
        due: Due,
        verdict: super::probes::Verdict,
        output: &str,
        now: Millis,
    ) -> Vec<EventSpec> {
        let mut probes = std::mem::take(&mut self.probes);
        let events = probes.record(plan, self, due, verdict, output, now);
        self.probes = probes;
        events
    }

    /// The container could not be created or started: nothing ran (it stays waiting and is
    /// retried with back-off), or the process existed but could not exec (it terminated
    /// with exit code 128).
    pub fn on_start_failed(
        &mut self,
        plan: &PodPlan,
        i: usize,
        failure: StartFailure,
        msg: &str,
        now: Millis,
    ) {
        self.event(
            EventType::Warning,
            EventReason::Failed,
            format!("Error: {msg}"),
            Some(i),
        );
        let reason = match failure {
            StartFailure::Create => WaitingReason::CreateContainerError,
            StartFailure::Config => WaitingReason::CreateContainerConfigError,
            StartFailure::Exec => {
                self.containers[i].ever_created = true;
                let t = Terminated {
                    exit_code: 128,
                    signal: None,
                    reason: TerminatedReason::StartError,
                    message: Some(msg.to_string()),
                    started_at: None,
                    finished_at: Some(now),
                };
                self.exited(plan, i, t, now);
                return;
            }
        };
        let c = &mut self.containers[i];
        c.phase = Phase::Idle;
        c.state = State::Waiting {
            reason,
            message: Some(msg.to_string()),
        };
        if self.terminating.is_none() {
            let delay = c.backoff.on_exit(0, plan.max_backoff_ms);
            c.restart_at = Some(now + delay);
        }
    }

    /// The main process of container `i` ended.
    pub fn on_exited(&mut self, plan: &PodPlan, i: usize, exit: Exit, now: Millis) {
        let started_at = match self.containers[i].state {
            State::Running { started_at } => Some(started_at),
            _ => None,
        };
        let reason = if exit.oom_killed {
            TerminatedReason::OOMKilled
        } else if exit_code_succeeded(exit.exit_code) {
            TerminatedReason::Completed
        } else {
            TerminatedReason::Error
        };
        let t = Terminated {
            exit_code: exit.exit_code,
            signal: exit.signal,
            reason,
            message: exit.message,
            started_at,
            finished_at: Some(now),
        };
        self.exited(plan, i, t, now);
    }

    pub(super) fn exited(&mut self, plan: &PodPlan, i: usize, t: Terminated, now: Millis) {
        let ran = t.started_at.map_or(0, |s| now.saturating_sub(s));
        let failed = !t.succeeded();
        let kind = plan.containers[i].kind;
        let c = &mut self.containers[i];
        c.phase = Phase::Exited;
        c.started = false;
        // A plain init container that completed stays Ready, as in kubelet.
        c.ready = kind == Kind::Init && !failed;
        let killed_alone = c.stopping.as_ref().is_some_and(|s| s.restart_after);
        c.stopping = None;
        let after = restart::after_exit(plan, self, i, &t, killed_alone);
        if after == restart::AfterExit::RestartAll {
            self.begin_restart_all(plan, i, t.exit_code, now);
        }
        let restart = after == restart::AfterExit::Restart;
        let c = &mut self.containers[i];
        // kubelet shows a failed start's reason as waiting only when it will restart.
        match c.post_start_error.take().filter(|_| restart) {
            Some(msg) => {
                c.last_state = Some(t);
                c.state = State::Waiting {
                    reason: WaitingReason::PostStartHookError,
                    message: Some(msg),
                };
            }
            None => c.state = State::Terminated(t),
        }
        if restart {
            let c = &mut self.containers[i];
            let delay = c.backoff.on_exit(ran, plan.max_backoff_ms);
            c.restart_at = Some(now + delay);
        }
    }

    /// Recompute `started` and `ready` of a running container.
    pub(super) fn refresh_container(&mut self, plan: &PodPlan, i: usize) {
        let p = &plan.containers[i];
        let c = &mut self.containers[i];
        let running = c.phase == Phase::Running;
        c.started = running && c.post_start_done && (!p.has_startup_probe || c.startup_ok);
        c.ready =
            c.started && (!p.has_readiness_probe || c.readiness_ok) && self.terminating.is_none();
        // A plain init container is ready only once it has exited 0, never while running.
        if p.kind == Kind::Init {
            c.ready = c.phase == Phase::Exited
                && matches!(&c.state, State::Terminated(t) if t.succeeded());
        }
    }

    /// Probe results, from the prober: startup succeeded / readiness result.
    pub fn on_probe_started(&mut self, plan: &PodPlan, i: usize, ok: bool) {
        self.containers[i].startup_ok = ok;
        self.refresh_container(plan, i);
    }
    pub fn on_probe_ready(&mut self, plan: &PodPlan, i: usize, ok: bool) {
        self.containers[i].readiness_ok = ok;
        self.refresh_container(plan, i);
    }

    /// A preStop hook returned.
    pub fn on_pre_stop_done(&mut self, i: usize) {
        if let Some(s) = &mut self.containers[i].stopping {
            s.pre_stop = HookRun::Done;
        }
    }

    /// The postStart hook of container `i` failed: it is killed (preStop runs, with the
    /// pod's grace period) and then shows `waiting: PostStartHookError` until restarted.
    pub fn on_post_start_failed(&mut self, plan: &PodPlan, i: usize, msg: &str, now: Millis) {
        // kubelet keeps the hook's output out of events (it may hold secrets): the full
        // text shows only in the container's waiting message.
        self.event(
            EventType::Warning,
            EventReason::FailedPostStartHook,
            "PostStartHook failed".into(),
            Some(i),
        );
        // kubelet's kill message for this cause is just the reason.
        self.event(
            EventType::Normal,
            EventReason::Killing,
            "FailedPostStartHook".into(),
            Some(i),
        );
        self.containers[i].post_start_error = Some(msg.to_string());
        self.kill_container(plan, i, plan.grace_seconds.saturating_mul(1000), now);
    }

    /// Kill container `i` alone (a failed liveness/startup probe or postStart hook):
    /// preStop, stop signal, SIGKILL after `grace_ms`; then the restart policy applies.
    pub fn kill_container(&mut self, plan: &PodPlan, i: usize, grace_ms: Millis, now: Millis) {
        let c = &mut self.containers[i];
        if c.is_active() && c.stopping.is_none() {
            let pre_stop =
                if plan.containers[i].has_pre_stop && c.phase == Phase::Running && grace_ms > 0 {
                    HookRun::Pending
                } else {
                    HookRun::None
                };
            c.stopping = Some(Stopping {
                since: now,
                grace_ms,
                pre_stop,
                stop_sent_at: None,
                kill_at: None,
                killed: false,
                restart_after: true,
            });
        }
    }

    /// Set a readiness gate's condition (`PUT /v1/pod/conditions/TYPE`).
    pub fn set_gate(
        &mut self,
        type_: &str,
        status: bool,
        reason: Option<String>,
        message: Option<String>,
        now: Millis,
    ) {
        let last_transition = match self.gates.get(type_) {
            Some(g) if g.status == status => g.last_transition,
            _ => now,
        };
        self.gates.insert(
            type_.to_string(),
            GateCondition {
                status,
                reason,
                message,
                last_transition,
            },
        );
    }
}
