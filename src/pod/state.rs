//! Observed state of the pod and its containers, and the transitions observations cause.
//!
//! The supervisor reports what happened through the `on_*` methods (each takes `now`);
//! restart bookkeeping (restartCount, lastState, back-off) happens here, so that `step`
//! only decides.

use super::backoff::{self, Backoff};
use super::plan::{ContainerPlan, Kind, PodPlan};
use super::probes::Probes;
use super::reason::{EventReason, EventType, TerminatedReason, WaitingReason};
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
    /// Whether this run succeeded: the one rule for phase, restarts, readiness and
    /// conditions. kubelet judges by the exit code alone, whatever the reason: `getPhase`
    /// (pkg/kubelet/kubelet_pods.go) counts a terminated container as succeeded when
    /// `State.Terminated.ExitCode == 0` and an init container as failed when it is not, and
    /// `ShouldContainerBeRestarted` (pkg/kubelet/container/helpers.go) keeps an
    /// `OnFailure` container down when `ExitCode == 0`. So an OOMKilled run that still
    /// exited 0 succeeded.
    pub fn succeeded(&self) -> bool {
        exit_code_succeeded(self.exit_code)
    }

    /// Whether a plain init container's run blocks the pod's initialization: kubelet's
    /// `isInitContainerFailed` (pkg/kubelet/kuberuntime/kuberuntime_container.go), which
    /// `computeInitContainerActions` uses to run it again or, under `Never`, to kill the
    /// pod. It adds one case to [`Terminated::succeeded`]: an OOM kill is a failure even
    /// when the process exited 0 (a child was killed, the init's work may be incomplete).
    pub fn init_failed(&self) -> bool {
        !self.succeeded() || self.reason == super::reason::TerminatedReason::OOMKilled
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
    /// Removed by a restart of every container (`RestartAllContainers`): it runs again in
    /// the pod's order, as on the pod's first start.
    pub rerun: bool,
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
    /// Volumes the containers mount that are not set up yet: until there are none, no
    /// container starts.
    pub unmounted: super::volumes::Unmounted,
    /// A resize kubelet could not admit: `PodResizePending`'s reason and message.
    pub resize_pending: Option<(super::allocation::Pending, String)>,
    /// An allocated resize the containers' cgroups do not show yet: `PodResizeInProgress`.
    pub resize_in_progress: bool,
    /// A resize that failed to apply: `PodResizeInProgress` with reason `Error`.
    pub resize_error: Option<String>,
    /// A restart of every container under way (`RestartAllContainers`).
    pub restarting_all: Option<super::restart_all::RestartingAll>,
    /// The pod was initialized before a restart of every container: `Initialized` stays
    /// True.
    pub initialized_before: bool,
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
            rerun: false,
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
            probes: Probes::default(),
            stop_signals: 0,
            unmounted: Default::default(),
            restarting_all: None,
            initialized_before: false,
            resize_pending: None,
            resize_in_progress: false,
            resize_error: None,
            events: Vec::new(),
            who: (plan.name.clone(), plan.namespace.clone(), plan.uid.clone()),
        }
        .with_probes_of(plan)
    }

    fn with_probes_of(mut self, plan: &PodPlan) -> PodState {
        for (i, c) in plan.containers.iter().enumerate() {
            self.probes.add(i, &c.probes);
        }
        self
    }

    /// The state of container `c`, added at the end of `plan` (see [`super::add_container`]).
    pub(super) fn push_container(&mut self, c: &ContainerPlan) {
        let i = self.containers.len();
        let reason = match c.kind {
            Kind::App | Kind::Ephemeral => WaitingReason::ContainerCreating,
            Kind::Init | Kind::Sidecar => WaitingReason::PodInitializing,
        };
        self.containers.push(ContainerState::new(reason));
        self.probes.add(i, &c.probes);
    }

    pub(super) fn event(
        &mut self,
        type_: EventType,
        reason: EventReason,
        message: String,
        c: Option<usize>,
    ) {
        self.events.push(EventSpec {
            type_,
            reason,
            message,
            container: c,
        });
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
