//! Observed state of the pod and its containers, and the transitions observations cause.
//!
//! The supervisor reports what happened through the `on_*` methods (each takes `now`);
//! restart bookkeeping (restartCount, lastState, back-off) happens here, so that `step`
//! only decides.

use super::backoff::{self, Backoff};
use super::plan::{Kind, PodPlan};
use super::probes::{Due, Probes};
use super::reason::{EventReason, EventType, StartFailure, TerminatedReason, WaitingReason};
use super::step::EventSpec;
use super::Millis;
use std::collections::BTreeMap;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Terminated {
    pub exit_code: i32,
    pub signal: Option<i32>,
    pub reason: TerminatedReason,
    pub message: Option<String>,
    pub started_at: Option<Millis>,
    /// None only for a status kubelet could not locate (`ContainerStatusUnknown`).
    pub finished_at: Option<Millis>,
}

impl Terminated {
    /// Whether this run succeeded: the one rule for phase, restarts, init completion and
    /// conditions. kubelet judges by the exit code alone, whatever the reason: `getPhase`
    /// (pkg/kubelet/kubelet_pods.go) counts a terminated container as succeeded when
    /// `State.Terminated.ExitCode == 0` and an init container as failed when it is not, and
    /// `ShouldContainerBeRestarted` (pkg/kubelet/container/helpers.go) keeps an
    /// `OnFailure` container down when `ExitCode == 0`. So an OOMKilled run that still
    /// exited 0 succeeded.
    pub fn succeeded(&self) -> bool {
        exit_code_succeeded(self.exit_code)
    }
}

/// kubelet's success test on an exit code (see [`Terminated::succeeded`]).
pub(crate) const fn exit_code_succeeded(code: i32) -> bool {
    code == 0
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum State {
    Waiting {
        reason: WaitingReason,
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
    /// The termination message (already read and truncated), if any.
    pub message: Option<String>,
}

/// Where a container is in its life, beyond what the API state shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Never asked to start (or waiting to be restarted).
    Idle,
    /// `Start` was issued; the process does not run yet.
    Creating,
    /// The process runs.
    Running,
    /// The process ended.
    Exited,
}

/// A container being stopped (pod termination or a kill of this container alone).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stopping {
    /// When its termination began, and the grace it has from then.
    pub since: Millis,
    pub grace_ms: Millis,
    pub pre_stop: HookRun,
    pub stop_sent_at: Option<Millis>,
    /// SIGKILL is due then (set when the stop signal is sent).
    pub kill_at: Option<Millis>,
    pub killed: bool,
    /// A kill of this container alone (liveness, postStart failure): the restart policy
    /// applies afterwards.
    pub restart_after: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HookRun {
    None,
    /// To be started by the next `step` (a kill of this container alone).
    Pending,
    Running,
    Done,
}

#[derive(Clone, Debug)]
pub struct ContainerState {
    pub state: State,
    pub last_state: Option<Terminated>,
    pub restart_count: u32,
    pub phase: Phase,
    pub started: bool,
    pub ready: bool,
    /// A process was created at least once.
    pub ever_created: bool,
    pub post_start_done: bool,
    /// `step` asked for the postStart hook of this run.
    pub post_start_asked: bool,
    /// The postStart hook failed with this message: once the process is gone the
    /// container shows `waiting: PostStartHookError`.
    pub post_start_error: Option<String>,
    /// Probe results (set by the prober): startup succeeded, readiness succeeded.
    pub startup_ok: bool,
    pub readiness_ok: bool,
    pub backoff: Backoff,
    /// A restart is due at this time.
    pub restart_at: Option<Millis>,
    pub stopping: Option<Stopping>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GateCondition {
    pub status: bool,
    pub reason: Option<String>,
    pub message: Option<String>,
    pub last_transition: Millis,
}

/// A condition as last computed (its transition time changes only with its status).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Condition {
    pub type_: String,
    pub status: bool,
    pub reason: Option<String>,
    pub message: Option<String>,
    pub last_transition: Millis,
}

#[derive(Clone, Debug)]
pub struct Termination {
    pub since: Millis,
    /// Grace period in ms (0 = forced).
    pub grace_ms: Millis,
}

/// The pod's phase, as the API shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodPhase {
    Pending,
    Running,
    Succeeded,
    Failed,
}

impl PodPhase {
    pub fn as_str(self) -> &'static str {
        match self {
            PodPhase::Pending => "Pending",
            PodPhase::Running => "Running",
            PodPhase::Succeeded => "Succeeded",
            PodPhase::Failed => "Failed",
        }
    }
    pub fn is_terminal(self) -> bool {
        matches!(self, PodPhase::Succeeded | PodPhase::Failed)
    }
}

#[derive(Clone, Debug)]
pub struct PodState {
    pub containers: Vec<ContainerState>,
    pub sandbox_ready: bool,
    pub start_time: Option<Millis>,
    pub terminating: Option<Termination>,
    /// The pod was deleted (a signal, the API, `podinit stop`): when its grace runs out and
    /// the grace in seconds, as the API server records `deletionTimestamp` and
    /// `deletionGracePeriodSeconds`.
    pub deletion: Option<(Millis, u64)>,
    /// Pod-level reason and message (e.g. `DeadlineExceeded`).
    pub reason: Option<String>,
    pub message: Option<String>,
    /// A terminal phase once reached (it never changes again).
    pub terminal: Option<PodPhase>,
    /// An app container has started at least once (plain init containers never run again).
    pub app_started: bool,
    pub gates: BTreeMap<String, GateCondition>,
    pub conditions: Vec<Condition>,
    /// When each probe runs and what its results did (kubelet's prober workers).
    pub probes: Probes,
    /// SIGTERM/SIGINT received so far.
    pub stop_signals: u32,
    /// Events to hand out with the next `step`.
    pub(super) events: Vec<EventSpec>,
    /// The pod's identity, for messages.
    pub(super) who: (String, String, String),
}

impl ContainerState {
    pub fn new(default_reason: WaitingReason) -> ContainerState {
        ContainerState {
            state: State::Waiting {
                reason: default_reason,
                message: None,
            },
            last_state: None,
            restart_count: 0,
            phase: Phase::Idle,
            started: false,
            ready: false,
            ever_created: false,
            post_start_done: false,
            post_start_asked: false,
            post_start_error: None,
            startup_ok: false,
            readiness_ok: false,
            backoff: Backoff::default(),
            restart_at: None,
            stopping: None,
        }
    }

    /// The process exists (running, or being created).
    pub fn is_active(&self) -> bool {
        matches!(self.phase, Phase::Creating | Phase::Running)
    }

    /// The last termination: the current state if terminated, else `lastState`.
    pub fn last_termination(&self) -> Option<&Terminated> {
        match &self.state {
            State::Terminated(t) => Some(t),
            _ => self.last_state.as_ref(),
        }
    }
}

impl PodState {
    pub fn new(plan: &PodPlan) -> PodState {
        // kubelet shows containers not created yet as PodInitializing when the pod has
        // init containers, else ContainerCreating.
        let has_init = plan
            .containers
            .iter()
            .any(|c| matches!(c.kind, Kind::Init | Kind::Sidecar));
        let default = if has_init {
            WaitingReason::PodInitializing
        } else {
            WaitingReason::ContainerCreating
        };
        PodState {
            containers: plan
                .containers
                .iter()
                .map(|_| ContainerState::new(default))
                .collect(),
            sandbox_ready: false,
            start_time: None,
            terminating: None,
            deletion: None,
            reason: None,
            message: None,
            terminal: None,
            app_started: false,
            gates: BTreeMap::new(),
            conditions: Vec::new(),
            probes: Probes::new(
                &plan
                    .containers
                    .iter()
                    .map(|c| c.probes.clone())
                    .collect::<Vec<_>>(),
            ),
            stop_signals: 0,
            events: Vec::new(),
            who: (plan.name.clone(), plan.namespace.clone(), plan.uid.clone()),
        }
    }

    fn event(&mut self, type_: EventType, reason: EventReason, message: String, c: Option<usize>) {
        self.events.push(EventSpec {
            type_,
            reason,
            message,
            container: c,
        });
    }

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

    /// A probe `step` asked for (`Action::RunProbe`) has a result (`ok`, with the
    /// handler's output). Returns the events to record now.
    pub fn on_probe_result(
        &mut self,
        plan: &PodPlan,
        due: Due,
        ok: bool,
        output: &str,
        now: Millis,
    ) -> Vec<EventSpec> {
        let mut probes = std::mem::take(&mut self.probes);
        let events = probes.record(plan, self, due, ok, output, now);
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

    fn exited(&mut self, plan: &PodPlan, i: usize, t: Terminated, now: Millis) {
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
        // A container killed for a failed probe or hook restarts unless the policy is
        // Never, whatever its exit code (kubelet's `shouldRestartOnFailure`).
        let restart = self.terminating.is_none()
            && self.terminal.is_none()
            && if killed_alone {
                restarts_after_kill(plan, kind)
            } else {
                should_restart(plan, kind, failed)
            };
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

    /// Fail the pod with a reason (e.g. `DeadlineExceeded`) and terminate it.
    pub fn fail(&mut self, plan: &PodPlan, reason: &str, message: &str, now: Millis) {
        if self.terminal.is_none() {
            self.terminal = Some(PodPhase::Failed);
            self.reason = Some(reason.into());
            self.message = Some(message.into());
        }
        self.request_termination(plan, now, None);
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

    /// An ephemeral container was added to the plan (`PodPlan::add_ephemeral`): it waits
    /// to be started by the next `step`.
    pub fn add_ephemeral(&mut self) {
        self.containers
            .push(ContainerState::new(WaitingReason::ContainerCreating));
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

    /// The back-off message for container `i` waiting `delay_ms`.
    pub(super) fn backoff_message(&self, plan: &PodPlan, i: usize, delay_ms: Millis) -> String {
        let (pod, ns, uid) = &self.who;
        backoff::message(delay_ms, &plan.containers[i].name, pod, ns, uid)
    }

    pub(super) fn push_event(&mut self, e: EventSpec) {
        self.events.push(e);
    }
}

/// After a kill for a failed probe or hook: restarted unless the pod's policy is Never
/// (sidecars always).
pub fn restarts_after_kill(plan: &PodPlan, kind: Kind) -> bool {
    match kind {
        Kind::Sidecar => true,
        Kind::Ephemeral => false,
        _ => plan.restart_policy != super::plan::RestartPolicy::Never,
    }
}

/// The restart rule: `Never` → no; `OnFailure` → only a failure; `Always` → yes. Plain init
/// containers treat `Always` as `OnFailure`; sidecars always restart.
pub fn should_restart(plan: &PodPlan, kind: Kind, failed: bool) -> bool {
    use super::plan::RestartPolicy::*;
    match (kind, plan.restart_policy) {
        (Kind::Sidecar, _) => true,
        (Kind::Ephemeral, _) => false,
        (_, Never) => false,
        (Kind::Init, _) | (Kind::App, OnFailure) => failed,
        (Kind::App, Always) => true,
    }
}
