//! docs/semantics.md's rules as tables and scenarios, with time as a parameter.

use super::plan::{ContainerPlan, Kind, PodPlan, RestartPolicy};
use super::probes::{ProbeKind, Probes, Timing, Verdict};
use super::reason::StartFailure;
use super::state::{Exit, PodPhase, PodState, State};
use super::step::EventSpec;
use super::step::{step, Action};
use super::{phase, Millis};

struct Sim {
    plan: PodPlan,
    st: PodState,
    now: Millis,
}

fn cp(name: &str, kind: Kind) -> ContainerPlan {
    ContainerPlan::bare(name, kind)
}

impl Sim {
    fn new(policy: RestartPolicy, cs: Vec<ContainerPlan>) -> Sim {
        let plan = PodPlan::bare(policy, cs);
        let mut st = PodState::new(&plan);
        st.on_sandbox_ready(0);
        Sim { plan, st, now: 0 }
    }
    fn apps(policy: RestartPolicy, names: &[&str]) -> Sim {
        Sim::new(policy, names.iter().map(|n| cp(n, Kind::App)).collect())
    }
    fn idx(&self, name: &str) -> usize {
        self.plan
            .containers
            .iter()
            .position(|c| c.name == name)
            .unwrap()
    }
    fn step(&mut self) -> Vec<Action> {
        step(&self.plan, &mut self.st, self.now)
    }
    /// Step and carry out starts as immediate successes; return the other actions.
    fn settle(&mut self) -> Vec<Action> {
        let mut rest = Vec::new();
        for _ in 0..20 {
            let acts = self.step();
            if acts.is_empty() {
                break;
            }
            let mut started = false;
            for a in acts {
                if let Action::Start(i) = a {
                    self.st.on_started(&self.plan, i, self.now);
                    self.st.on_post_start_done(&self.plan, i, self.now);
                    started = true;
                } else {
                    rest.push(a);
                }
            }
            if !started {
                break;
            }
        }
        rest
    }
    fn exit(&mut self, name: &str, code: i32) {
        let i = self.idx(name);
        let exit = Exit {
            exit_code: code,
            signal: None,
            oom_killed: false,
            message: None,
        };
        self.st.on_exited(&self.plan, i, exit, self.now);
    }
    fn oom(&mut self, name: &str) {
        let i = self.idx(name);
        let exit = Exit {
            exit_code: 137,
            signal: Some(9),
            oom_killed: true,
            message: None,
        };
        self.st.on_exited(&self.plan, i, exit, self.now);
    }
    /// An OOM kill seen in the cgroup, with the main process exiting `code` (0: it was a
    /// child that the kernel killed, and the main process carried on to exit 0).
    fn oom_exit(&mut self, name: &str, code: i32) {
        let i = self.idx(name);
        let exit = Exit {
            exit_code: code,
            signal: (code == 137).then_some(9),
            oom_killed: true,
            message: None,
        };
        self.st.on_exited(&self.plan, i, exit, self.now);
    }
    fn phase(&self) -> PodPhase {
        phase(&self.plan, &self.st)
    }
    fn running(&self, name: &str) -> bool {
        matches!(
            self.st.containers[self.idx(name)].state,
            State::Running { .. }
        )
    }
    fn state(&self, name: &str) -> &State {
        &self.st.containers[self.idx(name)].state
    }
    fn waiting_reason(&self, name: &str) -> String {
        match self.state(name) {
            State::Waiting { reason, .. } => reason.as_str().to_string(),
            s => panic!("{name} is not waiting: {s:?}"),
        }
    }
    fn condition(&self, t: &str) -> (bool, Option<String>, Option<String>) {
        let c = self.st.conditions.iter().find(|c| c.type_ == t).unwrap();
        (c.status, c.reason.clone(), c.message.clone())
    }
}

/// The containers a step starts, in order: for the tests of `pod`'s modules.
pub(super) fn starts(acts: &[Action]) -> Vec<usize> {
    acts.iter()
        .filter_map(|a| match a {
            Action::Start(i) => Some(*i),
            _ => None,
        })
        .collect()
}

fn stops(acts: &[Action]) -> Vec<usize> {
    acts.iter()
        .filter_map(|a| match a {
            Action::Stop(i) => Some(*i),
            _ => None,
        })
        .collect()
}

/// The seed documents' table: what the pod does, per restart policy.
#[test]
fn seed_table() {
    use RestartPolicy::*;
    // (policy, expected: restarted?, phase) for "its one container exits 0".
    for (policy, restart, ph) in [
        (Always, true, PodPhase::Running),
        (OnFailure, false, PodPhase::Succeeded),
        (Never, false, PodPhase::Succeeded),
    ] {
        let mut s = Sim::apps(policy, &["c"]);
        s.settle();
        s.exit("c", 0);
        let acts = s.settle();
        assert_eq!(s.running("c"), restart, "{policy:?} exit 0");
        assert_eq!(s.phase(), ph, "{policy:?} exit 0: {acts:?}");
    }
    // "its one container exits non-zero"
    for (policy, restart, ph) in [
        (Always, true, PodPhase::Running),
        (OnFailure, true, PodPhase::Running),
        (Never, false, PodPhase::Failed),
    ] {
        let mut s = Sim::apps(policy, &["c"]);
        s.settle();
        s.exit("c", 1);
        s.settle();
        assert_eq!(s.running("c"), restart, "{policy:?} exit 1");
        assert_eq!(s.phase(), ph, "{policy:?} exit 1");
    }
    // "of two, container 1 fails" and "then container 2 exits too"
    for (policy, ph1, ph2) in [
        (Always, PodPhase::Running, PodPhase::Running),
        (OnFailure, PodPhase::Running, PodPhase::Running),
        (Never, PodPhase::Running, PodPhase::Failed),
    ] {
        let mut s = Sim::apps(policy, &["a", "b"]);
        s.settle();
        s.exit("a", 1);
        s.settle();
        assert_eq!(s.phase(), ph1, "{policy:?} one of two fails");
        assert_eq!(s.running("a"), policy != Never);
        s.exit("b", 0);
        s.settle();
        assert_eq!(s.phase(), ph2, "{policy:?} then the second exits");
    }
    // "its container is OOM-killed"
    for (policy, restart, ph) in [
        (Always, true, PodPhase::Running),
        (OnFailure, true, PodPhase::Running),
        (Never, false, PodPhase::Failed),
    ] {
        let mut s = Sim::apps(policy, &["c"]);
        s.settle();
        s.oom("c");
        s.settle();
        assert_eq!(s.running("c"), restart, "{policy:?} OOM");
        assert_eq!(s.phase(), ph, "{policy:?} OOM");
        let t = s.st.containers[0].last_termination().unwrap();
        assert_eq!((t.reason.as_str(), t.exit_code), ("OOMKilled", 137));
    }
}

#[test]
fn backoff_is_immediate_then_10s_doubling_with_crashloop_status() {
    let mut s = Sim::apps(RestartPolicy::Always, &["c"]);
    s.settle();
    assert_eq!(s.st.containers[0].restart_count, 0);
    s.now = 1000;
    s.exit("c", 1);
    s.settle();
    assert!(s.running("c"), "first restart is immediate");
    assert_eq!(s.st.containers[0].restart_count, 1);
    assert_eq!(s.st.containers[0].last_state.as_ref().unwrap().exit_code, 1);
    s.now = 2000;
    s.exit("c", 2);
    let acts = s.settle();
    assert_eq!(s.waiting_reason("c"), "CrashLoopBackOff");
    match s.state("c") {
        State::Waiting { message, .. } => assert_eq!(
            message.as_deref(),
            Some("back-off 10s restarting failed container=c pod=p_default(u)")
        ),
        _ => unreachable!(),
    }
    assert!(acts.contains(&Action::WakeAt(12_000)), "{acts:?}");
    assert!(acts
        .iter()
        .any(|a| matches!(a, Action::Event(e) if e.reason == "BackOff" && e.type_ == "Warning")));
    assert_eq!(s.st.containers[0].last_state.as_ref().unwrap().exit_code, 2);
    assert_eq!(s.st.containers[0].restart_count, 1, "not restarted yet");
    assert_eq!(s.phase(), PodPhase::Running);
    s.now = 11_999;
    assert!(!s.settle().iter().any(|a| matches!(a, Action::Start(_))));
    s.now = 12_000;
    s.settle();
    assert!(s.running("c"));
    assert_eq!(s.st.containers[0].restart_count, 2);
    s.now = 13_000;
    s.exit("c", 1);
    let acts = s.settle();
    assert!(
        acts.contains(&Action::WakeAt(33_000)),
        "then 20 s: {acts:?}"
    );
}

#[test]
fn init_containers_run_in_order_before_apps() {
    let mut s = Sim::new(
        RestartPolicy::Always,
        vec![
            cp("i1", Kind::Init),
            cp("i2", Kind::Init),
            cp("app", Kind::App),
        ],
    );
    let acts = s.step();
    assert_eq!(
        acts.iter()
            .filter(|a| matches!(a, Action::Start(_)))
            .count(),
        1
    );
    assert!(acts.contains(&Action::Start(0)));
    s.st.on_started(&s.plan, 0, 0);
    s.st.on_post_start_done(&s.plan, 0, s.now);
    assert!(
        !s.step().iter().any(|a| matches!(a, Action::Start(_))),
        "i2 waits"
    );
    assert_eq!(s.phase(), PodPhase::Pending);
    assert_eq!(s.waiting_reason("app"), "PodInitializing");
    let (st, reason, msg) = s.condition("Initialized");
    assert!(!st);
    assert_eq!(reason.as_deref(), Some("ContainersNotInitialized"));
    assert_eq!(
        msg.as_deref(),
        Some("containers with incomplete status: [i1 i2]")
    );
    s.exit("i1", 0);
    assert!(s.step().contains(&Action::Start(1)));
    s.st.on_started(&s.plan, 1, 0);
    s.st.on_post_start_done(&s.plan, 1, s.now);
    s.exit("i2", 0);
    s.settle();
    assert!(s.running("app"));
    assert!(s.condition("Initialized").0);
    assert_eq!(s.phase(), PodPhase::Running);
    assert!(s.condition("Ready").0);
}

#[test]
fn init_failure_under_never_fails_the_pod() {
    let mut s = Sim::new(
        RestartPolicy::Never,
        vec![cp("i", Kind::Init), cp("app", Kind::App)],
    );
    s.settle();
    s.exit("i", 1);
    let acts = s.settle();
    assert_eq!(s.phase(), PodPhase::Failed);
    assert!(acts.contains(&Action::Finish), "{acts:?}");
    assert_eq!(s.waiting_reason("app"), "PodInitializing");
}

#[test]
fn init_failure_otherwise_retries_with_backoff_and_stays_pending() {
    for policy in [RestartPolicy::OnFailure, RestartPolicy::Always] {
        let mut s = Sim::new(policy, vec![cp("i", Kind::Init), cp("app", Kind::App)]);
        s.settle();
        s.exit("i", 1);
        s.settle();
        assert!(s.running("i"), "immediate retry");
        s.exit("i", 1);
        s.settle();
        assert_eq!(s.waiting_reason("i"), "CrashLoopBackOff");
        assert_eq!(s.phase(), PodPhase::Pending, "{policy:?}");
        assert_eq!(s.waiting_reason("app"), "PodInitializing");
    }
}

#[test]
fn sidecars_start_in_order_and_stop_after_apps_in_reverse() {
    let mut s = Sim::new(
        RestartPolicy::Never,
        vec![
            cp("log", Kind::Sidecar),
            cp("proxy", Kind::Sidecar),
            cp("init", Kind::Init),
            cp("app", Kind::App),
        ],
    );
    // Not started yet → the next waits.
    let acts = s.step();
    assert_eq!(
        acts.iter()
            .filter(|a| matches!(a, Action::Start(_)))
            .count(),
        1
    );
    s.st.on_started(&s.plan, 0, 0);
    assert!(
        !s.step().iter().any(|a| matches!(a, Action::Start(_))),
        "postStart pending"
    );
    s.st.on_post_start_done(&s.plan, 0, s.now);
    assert!(s.step().contains(&Action::Start(1)));
    s.st.on_started(&s.plan, 1, 0);
    s.st.on_post_start_done(&s.plan, 1, s.now);
    s.settle();
    s.exit("init", 0);
    s.settle();
    assert!(s.running("app") && s.running("log") && s.running("proxy"));
    // A sidecar restarts whatever the pod's policy.
    s.exit("log", 1);
    s.settle();
    assert!(s.running("log"));
    // The app completes: sidecars are stopped, later ones first.
    s.now = 5000;
    s.exit("app", 0);
    let acts = s.settle();
    assert_eq!(stops(&acts), vec![1], "proxy first: {acts:?}");
    s.exit("proxy", 143);
    let acts = s.settle();
    assert_eq!(stops(&acts), vec![0], "then log: {acts:?}");
    s.exit("log", 143);
    let acts = s.settle();
    assert!(acts.contains(&Action::Finish));
    assert_eq!(s.phase(), PodPhase::Succeeded, "sidecars don't count");
}

#[test]
fn termination_signals_apps_then_kills_at_the_end_of_grace() {
    let mut s = Sim::apps(RestartPolicy::Always, &["a", "b"]);
    s.plan.grace_seconds = 5;
    s.settle();
    s.now = 1000;
    s.st.request_termination(&s.plan, s.now, None);
    let acts = s.settle();
    assert_eq!(stops(&acts), vec![0, 1]);
    assert!(acts.contains(&Action::WakeAt(6000)), "{acts:?}");
    assert!(!s.condition("Ready").0, "not Ready at once");
    s.exit("a", 0);
    s.now = 6000;
    let acts = s.settle();
    assert_eq!(
        acts,
        vec![Action::Kill(1)],
        "b is killed at the end of grace"
    );
    s.st.on_exited(
        &s.plan,
        1,
        Exit {
            exit_code: 137,
            signal: Some(9),
            oom_killed: false,
            message: None,
        },
        s.now,
    );
    let acts = s.settle();
    assert_eq!(acts, vec![Action::Finish]);
    assert_eq!(s.phase(), PodPhase::Failed, "b did not exit 0");
    // No restart once terminating, whatever the policy.
    assert!(!s.running("a"));
}

#[test]
fn a_second_request_only_shrinks_and_zero_kills_at_once() {
    let mut s = Sim::apps(RestartPolicy::Always, &["a"]);
    s.settle();
    s.st.request_termination(&s.plan, 0, Some(10));
    let acts = s.settle();
    assert!(acts.contains(&Action::WakeAt(10_000)));
    s.st.request_termination(&s.plan, 1000, Some(60));
    let acts = s.settle();
    assert!(
        acts.contains(&Action::WakeAt(10_000)),
        "can't grow: {acts:?}"
    );
    s.st.request_termination(&s.plan, 1000, Some(0));
    s.now = 1000;
    let acts = s.settle();
    assert!(acts.contains(&Action::Kill(0)), "{acts:?}");
}

#[test]
fn pre_stop_runs_first_and_sidecars_wait_for_apps_within_grace() {
    let mut cs = vec![cp("side", Kind::Sidecar), cp("app", Kind::App)];
    cs[1].has_pre_stop = true;
    cs[0].has_pre_stop = true;
    let mut s = Sim::new(RestartPolicy::Always, cs);
    s.plan.grace_seconds = 10;
    s.settle();
    s.st.request_termination(&s.plan, 0, None);
    let acts = s.settle();
    assert!(acts.contains(&Action::RunPreStop(0)) && acts.contains(&Action::RunPreStop(1)));
    assert!(stops(&acts).is_empty(), "hooks first");
    s.now = 3500;
    s.st.on_pre_stop_done(1);
    s.st.on_pre_stop_done(0);
    let acts = s.settle();
    assert_eq!(
        stops(&acts),
        vec![1],
        "the app, not yet the sidecar: {acts:?}"
    );
    // remaining = 10 s - 3 whole seconds = 7 s from now.
    assert!(acts.contains(&Action::WakeAt(10_500)), "{acts:?}");
    s.now = 10_000;
    let acts = s.settle();
    assert_eq!(
        stops(&acts),
        vec![0],
        "grace is up: the sidecar too: {acts:?}"
    );
    assert!(
        acts.contains(&Action::WakeAt(12_000)),
        "2 s minimum: {acts:?}"
    );
}

#[test]
fn deadline_fails_the_pod() {
    let mut s = Sim::apps(RestartPolicy::Always, &["a"]);
    s.plan.active_deadline_seconds = Some(5);
    let acts = s.settle();
    assert!(acts.contains(&Action::WakeAt(5000)));
    s.now = 5000;
    let acts = s.settle();
    assert!(acts
        .iter()
        .any(|a| matches!(a, Action::Event(e) if e.reason == "DeadlineExceeded")));
    assert_eq!(stops(&acts), vec![0]);
    assert_eq!(s.phase(), PodPhase::Failed);
    assert_eq!(s.st.reason.as_deref(), Some("DeadlineExceeded"));
}

#[test]
fn conditions_and_readiness_gates() {
    let mut s = Sim::apps(RestartPolicy::Always, &["a", "b"]);
    s.plan.readiness_gates = vec!["example.com/gate".into()];
    s.step();
    assert!(s.condition("PodReadyToStartContainers").0);
    let (ok, reason, msg) = s.condition("ContainersReady");
    assert!(!ok);
    assert_eq!(reason.as_deref(), Some("ContainersNotReady"));
    assert_eq!(
        msg.as_deref(),
        Some("containers with unready status: [a b]")
    );
    s.st.on_started(&s.plan, 0, 0);
    s.st.on_post_start_done(&s.plan, 0, s.now);
    s.now = 100;
    s.settle();
    assert!(s.condition("ContainersReady").0);
    let (ok, reason, msg) = s.condition("Ready");
    assert!(!ok);
    assert_eq!(reason.as_deref(), Some("ReadinessGatesNotReady"));
    assert!(msg.unwrap().contains("does not exist"));
    let t0 =
        s.st.conditions
            .iter()
            .find(|c| c.type_ == "Ready")
            .unwrap()
            .last_transition;
    s.now = 200;
    s.st.set_gate("example.com/gate", true, None, None, s.now);
    s.settle();
    let ready = s.st.conditions.iter().find(|c| c.type_ == "Ready").unwrap();
    assert!(ready.status);
    assert_eq!(ready.last_transition, 200);
    assert_ne!(t0, 200);
    s.now = 300;
    s.settle();
    let ready = s.st.conditions.iter().find(|c| c.type_ == "Ready").unwrap();
    assert_eq!(
        ready.last_transition, 200,
        "unchanged status keeps its time"
    );
}

#[test]
fn a_start_error_is_a_terminated_run_and_a_create_error_waits() {
    let mut s = Sim::apps(RestartPolicy::Never, &["a"]);
    let acts = s.step();
    assert_eq!(acts[0], Action::Start(0));
    s.st.on_start_failed(&s.plan, 0, StartFailure::Exec, "exec: no such file", 0);
    let acts = s.settle();
    match s.state("a") {
        State::Terminated(t) => {
            assert_eq!((t.exit_code, t.reason.as_str()), (128, "StartError"));
        }
        other => panic!("{other:?}"),
    }
    assert!(acts.contains(&Action::Finish));
    assert_eq!(s.phase(), PodPhase::Failed);

    // A create error is retried with the same back-off (the first retry at once).
    let mut s = Sim::apps(RestartPolicy::Always, &["a"]);
    s.step();
    s.st.on_start_failed(&s.plan, 0, StartFailure::Create, "bad mount", 0);
    assert_eq!(s.waiting_reason("a"), "CreateContainerError");
    assert_eq!(s.step()[0], Action::Start(0));
    s.st.on_start_failed(&s.plan, 0, StartFailure::Create, "bad mount", 0);
    let acts = s.step();
    assert!(acts.contains(&Action::WakeAt(10_000)), "{acts:?}");
    assert_eq!(s.waiting_reason("a"), "CreateContainerError");
    assert_eq!(s.phase(), PodPhase::Pending);
}

#[test]
fn default_waiting_reasons() {
    let s = Sim::apps(RestartPolicy::Always, &["a"]);
    assert_eq!(s.waiting_reason("a"), "ContainerCreating");
    let s = Sim::new(
        RestartPolicy::Always,
        vec![cp("i", Kind::Init), cp("a", Kind::App)],
    );
    assert_eq!(s.waiting_reason("i"), "PodInitializing");
    assert_eq!(s.waiting_reason("a"), "PodInitializing");
    assert_eq!(s.phase(), PodPhase::Pending);
}

fn timing(period_s: u64, success: u32, failure: u32) -> Timing {
    Timing {
        initial_delay_ms: 0,
        period_ms: period_s * 1000,
        timeout_ms: 1000,
        success_threshold: success,
        failure_threshold: failure,
        grace_ms: None,
    }
}

/// Run every due probe of the pod with `ok` at the current time; return the events.
fn probe_all(s: &mut Sim, pr: &mut Probes, ok: impl Fn(ProbeKind) -> bool) -> Vec<EventSpec> {
    let (due, _) = pr.due(&s.st, s.now);
    let mut ev = Vec::new();
    for d in due {
        let verdict = Verdict::of(ok(d.kind), false);
        ev.extend(pr.record(&s.plan, &mut s.st, d, verdict, "out", s.now));
    }
    ev
}

#[test]
fn probes_start_with_kubelets_initial_results_and_honour_the_delay() {
    let mut cs = vec![cp("web", Kind::App)];
    cs[0].has_readiness_probe = true;
    cs[0].has_liveness_probe = true;
    let mut s = Sim::new(RestartPolicy::Always, cs);
    let mut t = timing(10, 1, 3);
    t.initial_delay_ms = 5000;
    let mut pr = Probes::new(&[vec![(ProbeKind::Liveness, t), (ProbeKind::Readiness, t)]]);
    s.settle();
    pr.container_started(0, 0, s.now);
    // Readiness starts as Failure, liveness as Success.
    assert!(!s.st.containers[0].ready && s.st.containers[0].started);
    let (due, next) = pr.due(&s.st, 1000);
    assert!(due.is_empty());
    assert_eq!(next, Some(5000), "first probe after initialDelaySeconds");
    s.now = 5000;
    probe_all(&mut s, &mut pr, |_| true);
    assert!(s.st.containers[0].ready);
    // The next one a period later.
    let (due, next) = pr.due(&s.st, 6000);
    assert!(due.is_empty());
    assert_eq!(next, Some(15_000));
}

#[test]
fn a_probe_that_could_not_run_counts_as_a_failure_and_says_it_errored() {
    let mut cs = vec![cp("web", Kind::App)];
    cs[0].has_readiness_probe = true;
    let mut s = Sim::new(RestartPolicy::Always, cs);
    let mut pr = Probes::new(&[vec![(ProbeKind::Readiness, timing(1, 1, 1))]]);
    s.settle();
    pr.container_started(0, 0, 0);
    probe_all(&mut s, &mut pr, |_| true);
    assert!(s.st.containers[0].ready);
    s.now = 1000;
    let (due, _) = pr.due(&s.st, s.now);
    let why = "opening /proc/self/ns/pid: Too many open files (os error 24)";
    let ev = pr.record(&s.plan, &mut s.st, due[0], Verdict::Errored, why, s.now);
    assert_eq!(ev[0].reason, "Unhealthy");
    assert_eq!(
        ev[0].message,
        format!("Readiness probe errored and resulted in unknown state: {why}")
    );
    assert!(!s.st.containers[0].ready, "an error is a failure");
}

#[test]
fn thresholds_count_consecutive_results() {
    let mut cs = vec![cp("web", Kind::App)];
    cs[0].has_readiness_probe = true;
    let mut s = Sim::new(RestartPolicy::Always, cs);
    let mut pr = Probes::new(&[vec![(ProbeKind::Readiness, timing(1, 2, 3))]]);
    s.settle();
    pr.container_started(0, 0, 0);
    let at = |s: &mut Sim, pr: &mut Probes, ms: u64, ok: bool| {
        s.now = ms;
        probe_all(s, pr, |_| ok)
    };
    at(&mut s, &mut pr, 0, true);
    assert!(!s.st.containers[0].ready, "one success of two");
    at(&mut s, &mut pr, 1000, true);
    assert!(s.st.containers[0].ready, "two in a row");
    let ev = at(&mut s, &mut pr, 2000, false);
    assert_eq!(ev[0].reason, "Unhealthy");
    assert_eq!(ev[0].message, "Readiness probe failed: out");
    at(&mut s, &mut pr, 3000, false);
    assert!(s.st.containers[0].ready, "two failures of three");
    at(&mut s, &mut pr, 4000, true);
    at(&mut s, &mut pr, 5000, false);
    at(&mut s, &mut pr, 6000, false);
    assert!(s.st.containers[0].ready, "the run was broken by a success");
    at(&mut s, &mut pr, 7000, false);
    assert!(!s.st.containers[0].ready);
    assert_eq!(
        s.phase(),
        PodPhase::Running,
        "readiness never restarts anything"
    );
    assert!(s.st.containers[0].stopping.is_none());
}

#[test]
fn liveness_failure_kills_with_the_probe_grace_and_restarts_by_policy() {
    for (policy, restarts) in [
        (RestartPolicy::Always, true),
        (RestartPolicy::OnFailure, true),
        (RestartPolicy::Never, false),
    ] {
        let mut cs = vec![cp("web", Kind::App)];
        cs[0].has_liveness_probe = true;
        let mut s = Sim::new(policy, cs);
        let mut t = timing(1, 1, 2);
        t.grace_ms = Some(4000);
        let mut pr = Probes::new(&[vec![(ProbeKind::Liveness, t)]]);
        s.settle();
        pr.container_started(0, 0, 0);
        probe_all(&mut s, &mut pr, |_| false);
        s.now = 1000;
        let ev = probe_all(&mut s, &mut pr, |_| false);
        let kill = ev.iter().find(|e| e.reason == "Killing").unwrap();
        let want = if restarts {
            "Container web failed liveness probe, will be restarted"
        } else {
            "Container web failed liveness probe"
        };
        assert_eq!(kill.message, want);
        let acts = s.settle();
        assert_eq!(stops(&acts), vec![0]);
        assert!(
            acts.contains(&Action::WakeAt(5000)),
            "probe grace 4 s: {acts:?}"
        );
        // On hold until the next instance.
        s.now = 2000;
        assert!(pr.due(&s.st, s.now).0.is_empty());
        // The container exits 0 on SIGTERM: still restarted unless Never.
        s.exit("web", 0);
        s.settle();
        assert_eq!(s.running("web"), restarts, "{policy:?}");
        if restarts {
            assert_eq!(s.st.containers[0].restart_count, 1);
            pr.container_started(0, 1, s.now);
            assert_eq!(pr.due(&s.st, s.now).0.len(), 1, "probing again");
        } else {
            assert_eq!(s.phase(), PodPhase::Succeeded);
        }
    }
}

#[test]
fn the_startup_probe_holds_the_others_back_and_stops_once_started() {
    let mut cs = vec![cp("web", Kind::App)];
    cs[0].has_startup_probe = true;
    cs[0].has_liveness_probe = true;
    cs[0].has_readiness_probe = true;
    let mut s = Sim::new(RestartPolicy::Always, cs);
    let t = timing(1, 1, 3);
    let mut pr = Probes::new(&[vec![
        (ProbeKind::Startup, t),
        (ProbeKind::Liveness, t),
        (ProbeKind::Readiness, t),
    ]]);
    s.settle();
    pr.container_started(0, 0, 0);
    assert!(!s.st.containers[0].started);
    // What would run now (on a copy: looking must not put probes in flight).
    let kinds = |pr: &mut Probes, s: &Sim| {
        let (due, _) = pr.clone().due(&s.st, s.now);
        due.iter().map(|d| d.kind).collect::<Vec<ProbeKind>>()
    };
    assert_eq!(kinds(&mut pr, &s), vec![ProbeKind::Startup]);
    s.now = 1000;
    probe_all(&mut s, &mut pr, |_| true);
    assert!(s.st.containers[0].started);
    s.now = 2000;
    assert_eq!(
        kinds(&mut pr, &s),
        vec![ProbeKind::Liveness, ProbeKind::Readiness]
    );
}

#[test]
fn terminating_stops_liveness_but_not_readiness() {
    let mut cs = vec![cp("web", Kind::App)];
    cs[0].has_liveness_probe = true;
    cs[0].has_readiness_probe = true;
    let mut s = Sim::new(RestartPolicy::Always, cs);
    let t = timing(1, 1, 3);
    let mut pr = Probes::new(&[vec![(ProbeKind::Liveness, t), (ProbeKind::Readiness, t)]]);
    s.settle();
    pr.container_started(0, 0, 0);
    s.st.request_termination(&s.plan, 0, None);
    s.settle();
    let (due, _) = pr.due(&s.st, 0);
    assert_eq!(
        due.iter().map(|d| d.kind).collect::<Vec<_>>(),
        vec![ProbeKind::Readiness]
    );
}

#[test]
fn a_failed_post_start_kills_and_shows_post_start_hook_error() {
    let mut cs = vec![cp("web", Kind::App), cp("next", Kind::App)];
    cs[0].has_post_start = true;
    cs[0].has_pre_stop = true;
    let mut s = Sim::new(RestartPolicy::Always, cs);
    let acts = s.step();
    assert_eq!(acts, vec![Action::Start(0)]);
    s.st.on_started(&s.plan, 0, 0);
    // postStart pending: the next container waits, the API still shows it waiting.
    assert!(s.step().iter().all(|a| !matches!(a, Action::Start(_))));
    assert!(!s.st.containers[0].started);
    s.now = 500;
    s.st.on_post_start_failed(&s.plan, 0, "hook failed", s.now);
    let acts = s.step();
    assert!(
        acts.contains(&Action::RunPreStop(0)),
        "preStop runs: {acts:?}"
    );
    let reasons: Vec<&str> = acts
        .iter()
        .filter_map(|a| match a {
            Action::Event(e) => Some(e.reason.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(reasons, vec!["FailedPostStartHook", "Killing"]);
    s.st.on_pre_stop_done(0);
    let acts = s.step();
    assert_eq!(stops(&acts), vec![0]);
    s.now = 600;
    s.exit("web", 137);
    assert_eq!(s.waiting_reason("web"), "PostStartHookError");
    match s.state("web") {
        State::Waiting { message, .. } => assert_eq!(message.as_deref(), Some("hook failed")),
        _ => unreachable!(),
    }
    assert!(s.st.containers[0].last_state.is_some());
    // Restarted by policy (the first restart at once).
    assert!(s.step().contains(&Action::Start(0)));
}

fn events_of(acts: &[Action]) -> Vec<(String, String)> {
    acts.iter()
        .filter_map(|a| match a {
            Action::Event(e) => Some((e.reason.as_str().to_string(), e.message.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn every_kill_is_announced_when_termination_begins() {
    // kubelet records Killing before preStop and before a sidecar waits for its turn, and
    // also for a forced stop.
    for grace in [None, Some(0)] {
        let mut cs = vec![cp("side", Kind::Sidecar), cp("app", Kind::App)];
        cs[1].has_pre_stop = true;
        let mut s = Sim::new(RestartPolicy::Always, cs);
        s.settle();
        assert!(s.running("side") && s.running("app"));
        s.st.request_termination(&s.plan, s.now, grace);
        let acts = s.step();
        let killing: Vec<String> = events_of(&acts)
            .into_iter()
            .filter(|(r, _)| r == "Killing")
            .map(|(_, m)| m)
            .collect();
        assert_eq!(
            killing,
            ["Stopping container side", "Stopping container app"],
            "grace {grace:?}"
        );
        // No second announcement when the stop signal goes out.
        if grace.is_none() {
            s.st.on_pre_stop_done(1);
            let acts = s.step();
            assert_eq!(stops(&acts), vec![1]);
            assert!(events_of(&acts).iter().all(|(r, _)| r != "Killing"));
        }
    }
}

#[test]
fn a_sidecar_failing_its_probe_is_killed_as_an_init_container() {
    for kind in [ProbeKind::Liveness, ProbeKind::Startup] {
        let mut cs = vec![cp("side", Kind::Sidecar), cp("app", Kind::App)];
        cs[0].has_liveness_probe = kind == ProbeKind::Liveness;
        cs[0].has_startup_probe = kind == ProbeKind::Startup;
        let mut s = Sim::new(RestartPolicy::Never, cs);
        let mut pr = Probes::new(&[vec![(kind, timing(1, 1, 1))], vec![]]);
        s.settle();
        pr.container_started(0, 0, 0);
        let ev = probe_all(&mut s, &mut pr, |_| false);
        let kill = ev.iter().find(|e| e.reason == "Killing").unwrap();
        assert_eq!(
            kill.message,
            format!("Init container side failed {} probe", kind.lower())
        );
    }
}

#[test]
fn hook_failures_keep_their_output_out_of_events() {
    let mut cs = vec![cp("web", Kind::App)];
    cs[0].has_post_start = true;
    let mut s = Sim::new(RestartPolicy::Always, cs);
    s.step();
    s.st.on_started(&s.plan, 0, 0);
    s.st.on_post_start_failed(&s.plan, 0, "exec hook exited with 3: secret", 0);
    let ev = events_of(&s.step());
    assert!(ev.contains(&("FailedPostStartHook".into(), "PostStartHook failed".into())));
    assert!(ev.iter().all(|(_, m)| !m.contains("secret")), "{ev:?}");
}

#[test]
fn a_running_plain_init_container_is_not_ready() {
    let mut s = Sim::new(
        RestartPolicy::Always,
        vec![cp("i", Kind::Init), cp("app", Kind::App)],
    );
    s.settle();
    assert!(s.running("i"));
    let i = s.idx("i");
    assert!(s.st.containers[i].started && !s.st.containers[i].ready);
    s.exit("i", 0);
    s.settle();
    assert!(s.st.containers[i].ready, "ready once it exited 0");
}

#[test]
fn the_deadline_event_is_normal() {
    let mut s = Sim::apps(RestartPolicy::Always, &["a"]);
    s.plan.active_deadline_seconds = Some(5);
    s.settle();
    s.now = 5000;
    let acts = s.step();
    let e = acts
        .iter()
        .find_map(|a| match a {
            Action::Event(e) if e.reason == "DeadlineExceeded" => Some(e.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(e.type_, "Normal");
    // When the pod has ended, the sandbox is reported gone (the phase was set earlier).
    s.exit("a", 143);
    assert!(s.settle().contains(&Action::Finish));
    assert!(!s.condition("PodReadyToStartContainers").0);
}

#[test]
fn an_ended_pod_reports_what_it_left_unfinished_as_kubelet_does() {
    // Stopped while its container waits in back-off: the waiting state becomes an
    // unlocated failure, its last run stays; the sandbox is gone; a succeeded pod's
    // init containers are PodCompleted.
    let mut s = Sim::new(
        RestartPolicy::Always,
        vec![cp("i", Kind::Init), cp("app", Kind::App)],
    );
    s.settle();
    s.exit("i", 0);
    s.settle();
    // The first restart is at once; the second run's exit waits in back-off.
    s.exit("app", 1);
    s.now = 1000;
    s.settle();
    s.exit("app", 1);
    s.settle();
    assert_eq!(s.waiting_reason("app"), "CrashLoopBackOff");
    s.st.request_termination(&s.plan, s.now, None);
    let acts = s.settle();
    assert!(acts.contains(&Action::Finish), "{acts:?}");
    match s.state("app") {
        State::Terminated(t) => {
            assert_eq!(t.exit_code, 137);
            assert_eq!(t.reason, "ContainerStatusUnknown");
            assert_eq!(
                t.message.as_deref(),
                Some("The container could not be located when the pod was terminated")
            );
            assert_eq!(t.finished_at, None);
        }
        st => panic!("{st:?}"),
    }
    let app = s.idx("app");
    assert_eq!(
        s.st.containers[app].last_state.as_ref().unwrap().exit_code,
        1
    );
    assert_eq!(s.phase(), PodPhase::Failed);
    assert!(!s.condition("PodReadyToStartContainers").0);

    // An init container failing a Never pod leaves the app waiting: it never started.
    let mut s = Sim::new(
        RestartPolicy::Never,
        vec![
            cp("i", Kind::Init),
            cp("later", Kind::Init),
            cp("app", Kind::App),
        ],
    );
    s.settle();
    s.exit("i", 7);
    s.settle();
    assert_eq!(s.phase(), PodPhase::Failed);
    assert_eq!(s.waiting_reason("later"), "PodInitializing");
    assert_eq!(s.waiting_reason("app"), "PodInitializing");

    // Stopped before anything ran: the first init container is reported, the rest wait.
    let mut s = Sim::new(
        RestartPolicy::Always,
        vec![
            cp("i", Kind::Init),
            cp("later", Kind::Init),
            cp("app", Kind::App),
        ],
    );
    s.st.request_termination(&s.plan, 0, None);
    s.settle();
    assert!(matches!(s.state("i"), State::Terminated(t) if t.reason == "ContainerStatusUnknown"));
    assert_eq!(s.waiting_reason("later"), "PodInitializing");
    assert_eq!(s.waiting_reason("app"), "PodInitializing");

    // A succeeded pod with an init container.
    let mut s = Sim::new(
        RestartPolicy::Never,
        vec![cp("i", Kind::Init), cp("app", Kind::App)],
    );
    s.settle();
    s.exit("i", 0);
    s.settle();
    s.exit("app", 0);
    s.settle();
    assert_eq!(s.phase(), PodPhase::Succeeded);
    assert_eq!(
        s.condition("Initialized"),
        (true, Some("PodCompleted".into()), None)
    );
    // Without init containers there is no reason.
    let mut s = Sim::apps(RestartPolicy::Never, &["a"]);
    s.settle();
    s.exit("a", 0);
    s.settle();
    assert_eq!(s.condition("Initialized"), (true, None, None));
}

#[test]
fn a_deletion_is_recorded_and_only_brought_forward() {
    let mut s = Sim::apps(RestartPolicy::Always, &["a"]);
    s.settle();
    assert!(s.st.request_deletion(&s.plan, 1000, None));
    assert_eq!(s.st.deletion, Some((31_000, 30)));
    assert!(s.st.terminating.is_some());
    // A longer grace later changes nothing; a shorter one moves it forward.
    assert!(!s.st.request_deletion(&s.plan, 2000, Some(60)));
    assert!(s.st.request_deletion(&s.plan, 2000, Some(0)));
    assert_eq!(s.st.deletion, Some((2000, 0)));
}

/// One success rule: a run succeeded when it exited 0, whatever its reason (kubelet's
/// `getPhase` and `ShouldContainerBeRestarted` judge by the exit code). An OOMKilled exit 0
/// is a success for an app container; an OOMKilled exit 137 a failure everywhere.
#[test]
fn an_oom_kill_succeeds_or_fails_by_its_exit_code_alone() {
    use RestartPolicy::*;
    for (code, ok) in [(0, true), (137, false)] {
        let mut s = Sim::apps(Never, &["c"]);
        s.settle();
        s.oom_exit("c", code);
        s.settle();
        let t = s.st.containers[0].last_termination().unwrap().clone();
        assert_eq!(t.reason, "OOMKilled");
        assert_eq!(t.succeeded(), ok, "exit {code}");
        assert!(
            t.init_failed(),
            "an OOM kill fails an init container, exit {code}"
        );
        // Phase, under Never.
        let want = if ok {
            PodPhase::Succeeded
        } else {
            PodPhase::Failed
        };
        assert_eq!(s.phase(), want, "phase, OOMKilled exit {code}");

        // Restart, under OnFailure: only a failure restarts.
        let mut s = Sim::apps(OnFailure, &["c"]);
        s.settle();
        s.oom_exit("c", code);
        s.settle();
        assert_eq!(
            s.running("c"),
            !ok,
            "OnFailure restart, OOMKilled exit {code}"
        );
        assert_eq!(s.st.containers[0].restart_count, u32::from(!ok));
    }
}

/// A plain init container that was OOM killed has not completed, even if it exited 0:
/// kubelet's `isInitContainerFailed` makes `computeInitContainerActions` run it again
/// (OnFailure, Always) or kill the pod (Never); the app never starts.
#[test]
fn an_oom_killed_init_container_blocks_initialization_whatever_its_exit_code() {
    use RestartPolicy::*;
    for code in [0, 137] {
        let mut s = Sim::new(Never, vec![cp("i", Kind::Init), cp("app", Kind::App)]);
        s.settle();
        s.oom_exit("i", code);
        s.settle();
        assert!(
            !s.running("app"),
            "Never, exit {code}: the app never starts"
        );
        assert_eq!(s.phase(), PodPhase::Failed, "Never, exit {code}");

        let mut s = Sim::new(OnFailure, vec![cp("i", Kind::Init), cp("app", Kind::App)]);
        s.settle();
        s.oom_exit("i", code);
        s.settle();
        assert!(!s.running("app"), "OnFailure, exit {code}");
        assert!(!s.condition("Initialized").0, "OnFailure, exit {code}");
        // The first restart is immediate (kubelet's back-off starts with the second).
        assert!(s.running("i"), "OnFailure, exit {code}: run again");
        assert_eq!(
            s.st.containers[0].restart_count, 1,
            "OnFailure, exit {code}"
        );
        assert_eq!(s.phase(), PodPhase::Pending, "OnFailure, exit {code}");
    }
}

#[test]
fn step_asks_for_post_start_once_and_the_next_app_waits_for_it() {
    let mut cs = vec![cp("web", Kind::App), cp("next", Kind::App)];
    cs[0].has_post_start = true;
    let mut s = Sim::new(RestartPolicy::Always, cs);
    assert_eq!(s.step(), vec![Action::Start(0)]);
    s.st.on_started(&s.plan, 0, 0);
    let acts = s.step();
    assert!(acts.contains(&Action::RunPostStart(0)), "{acts:?}");
    assert!(!acts.contains(&Action::Start(1)));
    assert!(!s.step().contains(&Action::RunPostStart(0)), "asked once");
    s.st.on_post_start_done(&s.plan, 0, 0);
    assert!(s.step().contains(&Action::Start(1)));
    // A restart asks again.
    s.exit("web", 1);
    s.settle();
    assert!(s.running("web"));
}

#[test]
fn step_schedules_probes_and_wakes_for_the_next() {
    let mut cs = vec![cp("web", Kind::App)];
    cs[0].has_readiness_probe = true;
    cs[0].probes = vec![(ProbeKind::Readiness, timing(10, 1, 3))];
    let mut s = Sim::new(RestartPolicy::Always, cs);
    s.step();
    s.st.on_started(&s.plan, 0, 0);
    s.st.on_post_start_done(&s.plan, 0, 0);
    let acts = s.step();
    let due: Vec<_> = acts
        .iter()
        .filter_map(|a| match a {
            Action::RunProbe(d) => Some(*d),
            _ => None,
        })
        .collect();
    assert_eq!(due.len(), 1, "{acts:?}");
    assert_eq!((due[0].ctr, due[0].kind), (0, ProbeKind::Readiness));
    assert!(
        !s.step().iter().any(|a| matches!(a, Action::RunProbe(_))),
        "in flight"
    );
    let ev =
        s.st.on_probe_result(&s.plan, due[0], Verdict::Success, "", 0);
    assert!(ev.is_empty());
    assert!(s.st.containers[0].ready);
    s.now = 1000;
    let acts = s.step();
    assert!(acts.contains(&Action::WakeAt(10_000)), "{acts:?}");
    s.now = 10_000;
    assert!(s.step().iter().any(|a| matches!(a, Action::RunProbe(_))));
}

#[test]
fn a_second_stop_signal_forces() {
    let mut s = Sim::apps(RestartPolicy::Always, &["c"]);
    assert_eq!(s.st.on_stop_signal(), None, "the pod's grace");
    assert_eq!(s.st.on_stop_signal(), Some(0), "forced");
    assert_eq!(s.st.on_stop_signal(), Some(0));
}

#[test]
fn an_added_ephemeral_container_starts_at_once_outside_the_order() {
    let mut s = Sim::new(
        RestartPolicy::Always,
        vec![cp("i", Kind::Init), cp("app", Kind::App)],
    );
    s.settle();
    assert!(s.running("i"));
    let i = super::add_container(&mut s.plan, &mut s.st, cp("debug", Kind::Ephemeral));
    assert_eq!(i, 2);
    assert_eq!(s.waiting_reason("debug"), "ContainerCreating");
    assert!(s.step().contains(&Action::Start(2)));
}

#[test]
fn an_added_container_brings_its_probes() {
    let mut s = Sim::apps(RestartPolicy::Always, &["web"]);
    s.settle();
    let mut c = cp("side", Kind::App);
    c.has_readiness_probe = true;
    c.probes = vec![(ProbeKind::Readiness, timing(10, 1, 3))];
    let i = super::add_container(&mut s.plan, &mut s.st, c);
    assert_eq!(s.st.probes.workers.len(), 1);
    assert_eq!(s.st.probes.workers[0].ctr, i);
}
