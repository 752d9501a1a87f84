//! `step`: what to do next, as a pure function of plan, observed state and time
//! (kubelet's `computePodActions` and its termination ordering).

use super::conditions;
use super::plan::{Kind, PodPlan};
use super::probes::Due;
use super::reason::{EventReason, EventType, WaitingReason};
use super::state::{HookRun, Phase, PodPhase, PodState, State, Stopping};
use super::Millis;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventSpec {
    pub type_: EventType,
    pub reason: EventReason,
    pub message: String,
    /// The container it is about (index into `plan.containers`), or the pod.
    pub container: Option<usize>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Create and start container `i` (first start or restart; back-off already elapsed).
    Start(usize),
    /// Container `i`'s process runs: run its postStart hook, and report with
    /// `PodState::on_post_start_done` or `on_post_start_failed` (done at once if it has
    /// none: until then the container is not started).
    RunPostStart(usize),
    /// Run container `i`'s preStop hook; report with `PodState::on_pre_stop_done`.
    RunPreStop(usize),
    /// Run this probe (its handler, with its timeout); report with
    /// `PodState::on_probe_result`.
    RunProbe(Due),
    /// Send container `i` its stop signal.
    Stop(usize),
    /// SIGKILL container `i` (its whole cgroup).
    Kill(usize),
    /// Set up these volumes again (they failed before); report each with
    /// `PodState::on_mounted` or `on_mount_failed`.
    MountVolumes(Vec<String>),
    /// Call `step` again at this time even if nothing is observed before.
    WakeAt(Millis),
    /// Every container has ended and the pod is terminal: tear down and exit.
    Finish,
    /// Emit an event.
    Event(EventSpec),
}

/// kubelet's minimum grace once the grace period is used up (docs/semantics.md §Lifecycle hooks).
pub const MIN_GRACE_MS: Millis = 2000;

/// What to do now. Decisions are recorded in `state` (a container to start is marked as
/// being created, a stop signal as sent), so a second call at the same time returns only
/// what is still pending (timers).
pub fn step(plan: &PodPlan, st: &mut PodState, now: Millis) -> Vec<Action> {
    let mut acts = Vec::new();
    if st.terminal.is_some() && st.terminating.is_none() {
        // Finished before: nothing more to do.
        return acts;
    }
    deadline(plan, st, now, &mut acts);
    st.finish_restart_all(plan);
    if st.terminating.is_none() && st.restarting_all.is_none() && completed(plan, st) {
        st.request_termination(plan, now, None);
    }
    if st.terminating.is_none() && st.restarting_all.is_none() {
        if st.unmounted.is_empty() {
            restarts(plan, st, now, &mut acts);
            starts(plan, st, &mut acts);
        } else {
            mounts(st, now, &mut acts);
        }
    }
    stops(plan, st, now, &mut acts);
    post_starts(st, &mut acts);
    probes(st, now, &mut acts);
    let finished = st.terminating.is_some() && !st.containers.iter().any(|c| c.is_active());
    if finished {
        // A deadline set the phase when the termination began.
        if st.terminal.is_none() {
            st.terminal = Some(final_phase(plan, st));
        }
        if st.sandbox_ready {
            st.on_pod_ended(plan);
        }
    }
    conditions::update(plan, st, now);
    acts.extend(st.events.drain(..).map(Action::Event));
    if finished {
        acts.push(Action::Finish);
    }
    acts
}

/// `activeDeadlineSeconds`: past it, the pod fails and is terminated.
fn deadline(plan: &PodPlan, st: &mut PodState, now: Millis, acts: &mut Vec<Action>) {
    let (Some(d), Some(start)) = (plan.active_deadline_seconds, st.start_time) else {
        return;
    };
    if st.terminating.is_some() {
        return;
    }
    let at = start + d * 1000;
    if now >= at {
        let msg = "Pod was active on the node longer than the specified deadline";
        // kubelet's active-deadline handler records it as a Normal event.
        st.push_event(EventSpec {
            type_: EventType::Normal,
            reason: EventReason::DeadlineExceeded,
            message: msg.into(),
            container: None,
        });
        st.fail(plan, EventReason::DeadlineExceeded.as_str(), msg, now);
    } else {
        acts.push(Action::WakeAt(at));
    }
}

/// The pod has run its course: no app container runs or will be restarted, or an init
/// container failed under `restartPolicy: Never`.
fn completed(plan: &PodPlan, st: &PodState) -> bool {
    let init_failed = plan.containers.iter().zip(&st.containers).any(|(p, c)| {
        p.kind == Kind::Init
            && c.phase == Phase::Exited
            && c.restart_at.is_none()
            && matches!(&c.state, State::Terminated(t) if t.init_failed())
    });
    if init_failed {
        return true;
    }
    st.app_started
        && plan.apps().all(|i| {
            let c = &st.containers[i];
            c.phase == Phase::Exited && c.restart_at.is_none()
        })
}

/// A terminated pod is Succeeded only if every app container exited 0.
fn final_phase(plan: &PodPlan, st: &PodState) -> PodPhase {
    let all_ok = plan
        .apps()
        .all(|i| matches!(&st.containers[i].state, State::Terminated(t) if t.succeeded()));
    if all_ok {
        PodPhase::Succeeded
    } else {
        PodPhase::Failed
    }
}

/// Containers waiting to be restarted: start the due ones, show the others in back-off.
fn restarts(plan: &PodPlan, st: &mut PodState, now: Millis, acts: &mut Vec<Action>) {
    for i in 0..plan.containers.len() {
        let Some(at) = st.containers[i].restart_at else {
            continue;
        };
        if plan.containers[i].kind == Kind::Init && st.app_started {
            st.containers[i].restart_at = None;
            continue;
        }
        if at <= now {
            st.mark_creating(plan, i);
            acts.push(Action::Start(i));
            continue;
        }
        acts.push(Action::WakeAt(at));
        let c = &mut st.containers[i];
        if let State::Terminated(t) = &c.state {
            c.last_state = Some(t.clone());
            let delay = at - t.finished_at.unwrap_or(at);
            let message = st.backoff_message(plan, i, delay);
            st.containers[i].state = State::Waiting {
                reason: WaitingReason::CrashLoopBackOff,
                message: Some(message),
            };
            let name = &plan.containers[i].name;
            let (pod, ns, uid) = st.who.clone();
            st.push_event(EventSpec {
                type_: EventType::Warning,
                reason: EventReason::BackOff,
                message: format!(
                    "Back-off restarting failed container {name} in pod {pod}_{ns}({uid})"
                ),
                container: Some(i),
            });
        }
    }
}

/// First starts, in order: init containers one at a time (the next once the previous
/// completed, or once a sidecar is Started), then app containers, each once the previous
/// one's postStart returned.
fn starts(plan: &PodPlan, st: &mut PodState, acts: &mut Vec<Action>) {
    let fresh = |st: &PodState, i: usize| {
        let c = &st.containers[i];
        c.phase == Phase::Idle && (!c.ever_created || c.rerun) && c.restart_at.is_none()
    };
    // Ephemeral containers start as soon as they are added, outside the ordering.
    for i in 0..plan.containers.len() {
        if plan.containers[i].kind == Kind::Ephemeral && fresh(st, i) {
            st.mark_creating(plan, i);
            acts.push(Action::Start(i));
        }
    }
    for i in 0..plan.containers.len() {
        let c = &st.containers[i];
        match plan.containers[i].kind {
            Kind::Init => {
                if st.app_started {
                    continue;
                }
                let done = c.phase == Phase::Exited
                    && matches!(&c.state, State::Terminated(t) if !t.init_failed());
                if done {
                    continue;
                }
                if fresh(st, i) {
                    st.mark_creating(plan, i);
                    acts.push(Action::Start(i));
                }
                return;
            }
            Kind::Sidecar => {
                if c.started {
                    continue;
                }
                if fresh(st, i) {
                    st.mark_creating(plan, i);
                    acts.push(Action::Start(i));
                    return;
                }
                if !st.app_started {
                    return;
                }
            }
            Kind::Ephemeral => {}
            Kind::App => {
                let busy =
                    c.phase == Phase::Creating || (c.phase == Phase::Running && !c.post_start_done);
                if busy {
                    return;
                }
                if fresh(st, i) {
                    st.mark_creating(plan, i);
                    acts.push(Action::Start(i));
                    return;
                }
            }
        }
    }
}

/// kubelet's volume manager: no container starts until the volumes they mount are set up;
/// those that failed are tried again when their back-off ends.
fn mounts(st: &mut PodState, now: Millis, acts: &mut Vec<Action>) {
    let (due, next) = st.unmounted.due(now);
    if !due.is_empty() {
        acts.push(Action::MountVolumes(due));
    }
    if let Some(t) = next {
        acts.push(Action::WakeAt(t));
    }
}

/// postStart of containers whose process now runs.
fn post_starts(st: &mut PodState, acts: &mut Vec<Action>) {
    for (i, c) in st.containers.iter_mut().enumerate() {
        if c.phase == Phase::Running && !c.post_start_done && !c.post_start_asked {
            c.post_start_asked = true;
            acts.push(Action::RunPostStart(i));
        }
    }
}

/// The probes due now, and a wake-up for the next one.
fn probes(st: &mut PodState, now: Millis, acts: &mut Vec<Action>) {
    if st.probes.is_empty() {
        return;
    }
    let mut probes = std::mem::take(&mut st.probes);
    let (due, next) = probes.due(st, now);
    st.probes = probes;
    acts.extend(due.into_iter().map(Action::RunProbe));
    if let Some(t) = next {
        acts.push(Action::WakeAt(t));
    }
}

/// Drive every container being stopped: preStop, stop signal (sidecars after the app
/// containers and later sidecars, in reverse order), SIGKILL when its grace runs out.
fn stops(plan: &PodPlan, st: &mut PodState, now: Millis, acts: &mut Vec<Action>) {
    if let Some(t) = st.terminating.clone() {
        for i in 0..plan.containers.len() {
            let c = &mut st.containers[i];
            if c.is_active() && c.stopping.as_ref().is_none_or(|s| s.restart_after) {
                let pre_stop = if plan.containers[i].has_pre_stop
                    && t.grace_ms > 0
                    && c.phase == Phase::Running
                {
                    acts.push(Action::RunPreStop(i));
                    HookRun::Running
                } else {
                    HookRun::None
                };
                c.stopping = Some(Stopping {
                    since: t.since,
                    grace_ms: t.grace_ms,
                    pre_stop,
                    stop_sent_at: None,
                    kill_at: None,
                    killed: false,
                    restart_after: false,
                });
                // kubelet announces every kill as it begins: before the preStop hook and
                // before a sidecar waits for its turn.
                st.push_event(EventSpec {
                    type_: EventType::Normal,
                    reason: EventReason::Killing,
                    message: format!("Stopping container {}", plan.containers[i].name),
                    container: Some(i),
                });
            }
        }
    }
    for i in 0..plan.containers.len() {
        let active = st.containers[i].is_active();
        let Some(mut s) = st.containers[i].stopping.clone() else {
            continue;
        };
        if !active || s.killed {
            continue;
        }
        if s.pre_stop == HookRun::Pending {
            s.pre_stop = HookRun::Running;
            acts.push(Action::RunPreStop(i));
        }
        let end = s.since + s.grace_ms;
        if s.grace_ms == 0 {
            s.killed = true;
            acts.push(Action::Kill(i));
            st.containers[i].stopping = Some(s);
            continue;
        }
        if s.pre_stop == HookRun::Running {
            if now < end {
                acts.push(Action::WakeAt(end));
                st.containers[i].stopping = Some(s);
                continue;
            }
            // Overran the grace period: abandoned.
            s.pre_stop = HookRun::Done;
        }
        if s.stop_sent_at.is_none() {
            let waits_for_others = plan.containers[i].kind == Kind::Sidecar
                && !s.restart_after
                && (0..plan.containers.len()).any(|j| {
                    (plan.containers[j].kind == Kind::App
                        || (j > i && plan.containers[j].kind != Kind::Ephemeral))
                        && j != i
                        && st.containers[j].is_active()
                });
            if waits_for_others && now < end {
                acts.push(Action::WakeAt(end));
                st.containers[i].stopping = Some(s);
                continue;
            }
            // The grace left, in whole seconds elapsed as kubelet counts it, at least 2 s.
            let elapsed = (now.saturating_sub(s.since) / 1000) * 1000;
            let remaining = s.grace_ms.saturating_sub(elapsed).max(MIN_GRACE_MS);
            s.stop_sent_at = Some(now);
            s.kill_at = Some(now + remaining);
            acts.push(Action::Stop(i));
        }
        match s.kill_at {
            Some(k) if now >= k => {
                s.killed = true;
                acts.push(Action::Kill(i));
            }
            Some(k) => acts.push(Action::WakeAt(k)),
            None => {}
        }
        st.containers[i].stopping = Some(s);
    }
}
