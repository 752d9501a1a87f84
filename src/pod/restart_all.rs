//! `RestartAllContainers` (KEP-5532): a container's exit that matches a rule with this
//! action restarts the whole pod in place. kubelet sets `AllContainersRestarting`, kills
//! every container but the ephemeral ones at once (no preStop, no grace period) and
//! removes them, keeping the sandbox: namespaces, IP, volumes and emptyDir contents. Once
//! none runs, the condition turns False and the pod starts again from its first init
//! container, in Pending, as a new pod would; the statuses keep their restart counts and
//! last states. `Initialized` stays True, as kubelet never un-initializes a pod.

use super::plan::{Kind, PodPlan};
use super::reason::{EventReason, EventType, WaitingReason};
use super::state::{HookRun, Phase, PodState, State, Stopping};
use super::step::EventSpec;
use super::Millis;

/// A restart of every container under way.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestartingAll {
    pub since: Millis,
    /// The condition's message: which container's exit triggered it.
    pub message: String,
}

/// The condition kubelet shows while it restarts every container.
pub const CONDITION: &str = "AllContainersRestarting";
/// Its reason.
pub const REASON: &str = "ContainerExited";

impl PodState {
    /// Container `i` exited with `code`, matching a `RestartAllContainers` rule: kill every
    /// other container now (grace 0, no preStop), and cancel pending restarts.
    pub(super) fn begin_restart_all(&mut self, plan: &PodPlan, i: usize, code: i32, now: Millis) {
        self.restarting_all = Some(RestartingAll {
            since: now,
            message: format!(
                "Container {} exited with code {code}, triggering pod restart",
                plan.containers[i].name
            ),
        });
        for j in 0..self.containers.len() {
            if plan.containers[j].kind == Kind::Ephemeral {
                continue;
            }
            let c = &mut self.containers[j];
            c.restart_at = None;
            if !c.is_active() || c.stopping.as_ref().is_some_and(|s| !s.restart_after) {
                continue;
            }
            c.stopping = Some(Stopping {
                since: now,
                grace_ms: 0,
                pre_stop: HookRun::None,
                stop_sent_at: None,
                kill_at: None,
                killed: false,
                restart_after: false,
            });
            self.events.push(EventSpec {
                type_: EventType::Normal,
                reason: EventReason::Killing,
                message: format!("Stopping container {}", plan.containers[j].name),
                container: Some(j),
            });
        }
        for j in 0..self.containers.len() {
            self.refresh_container(plan, j);
        }
    }

    /// Once no container of the restart runs: every container but the ephemeral ones
    /// waits to run again, in the pod's order from the first init container.
    pub(super) fn finish_restart_all(&mut self, plan: &PodPlan) {
        if self.restarting_all.is_none() || self.terminating.is_some() {
            return;
        }
        let running = (0..self.containers.len())
            .any(|j| plan.containers[j].kind != Kind::Ephemeral && self.containers[j].is_active());
        if running {
            return;
        }
        self.restarting_all = None;
        self.app_started = false;
        self.initialized_before = true;
        for j in 0..self.containers.len() {
            let kind = plan.containers[j].kind;
            if kind == Kind::Ephemeral {
                continue;
            }
            let c = &mut self.containers[j];
            if let State::Terminated(t) = &c.state {
                c.last_state = Some(t.clone());
            }
            c.state = State::Waiting {
                reason: if kind == Kind::App {
                    WaitingReason::ContainerCreating
                } else {
                    WaitingReason::PodInitializing
                },
                message: None,
            };
            c.phase = Phase::Idle;
            c.stopping = None;
            c.restart_at = None;
            c.rerun = true;
            c.started = false;
            c.ready = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::pod::plan::{ContainerPlan, Kind, PodPlan, RestartPolicy, RestartRule, RuleAction};
    use crate::pod::state::Exit;
    use crate::pod::tests::starts;
    use crate::pod::{step, Action, PodPhase, PodState, State};

    /// The docs' ml-worker: an init container, a watcher sidecar whose exit 88 restarts
    /// everything, and an app container, under `restartPolicy: Never`.
    fn ml_worker() -> PodPlan {
        let mut watcher = ContainerPlan::bare("watcher-sidecar", Kind::Sidecar);
        watcher.restart_rules = vec![RestartRule {
            action: RuleAction::RestartAllContainers,
            in_values: true,
            values: vec![88],
        }];
        PodPlan::bare(
            RestartPolicy::Never,
            vec![
                ContainerPlan::bare("setup-environment", Kind::Init),
                watcher,
                ContainerPlan::bare("main-application", Kind::App),
            ],
        )
    }

    fn exit(code: i32) -> Exit {
        Exit {
            exit_code: code,
            signal: None,
            oom_killed: false,
            message: None,
        }
    }

    fn condition(st: &PodState, t: &str) -> Option<bool> {
        st.conditions
            .iter()
            .find(|c| c.type_ == t)
            .map(|c| c.status)
    }

    /// Run the pod until its app container runs.
    fn run_up(plan: &PodPlan, st: &mut PodState, now: &mut u64) {
        for _ in 0..10 {
            let acts = step(plan, st, *now);
            for i in starts(&acts) {
                st.on_started(plan, i, *now);
                st.on_post_start_done(plan, i, *now);
                if plan.containers[i].kind == Kind::Init {
                    *now += 10;
                    st.on_exited(plan, i, exit(0), *now);
                }
            }
            *now += 10;
            if st.containers[2].phase == crate::pod::state::Phase::Running {
                return;
            }
        }
        panic!("the pod did not come up: {:?}", st.containers);
    }

    #[test]
    fn the_watchers_exit_restarts_every_container_from_the_first_init() {
        let plan = ml_worker();
        let mut st = PodState::new(&plan);
        st.on_sandbox_ready(0);
        let mut now = 0;
        run_up(&plan, &mut st, &mut now);
        assert_eq!(crate::pod::phase(&plan, &st), PodPhase::Running);
        // The watcher exits 88: every running container is killed at once.
        st.on_exited(&plan, 1, exit(88), now);
        let acts = step(&plan, &mut st, now);
        assert!(acts.contains(&Action::Kill(2)), "{acts:?}");
        assert!(!acts
            .iter()
            .any(|a| matches!(a, Action::RunPreStop(_) | Action::Stop(_))));
        assert!(starts(&acts).is_empty());
        assert_eq!(condition(&st, "AllContainersRestarting"), Some(true));
        assert_eq!(crate::pod::phase(&plan, &st), PodPhase::Pending);
        let c = st
            .conditions
            .iter()
            .find(|c| c.type_ == "AllContainersRestarting")
            .unwrap();
        assert_eq!(c.reason.as_deref(), Some("ContainerExited"));
        assert_eq!(
            c.message.as_deref(),
            Some("Container watcher-sidecar exited with code 88, triggering pod restart")
        );
        // The app dies of the kill; the pod does not end although its policy is Never.
        now += 5;
        st.on_exited(&plan, 2, exit(137), now);
        let acts = step(&plan, &mut st, now);
        assert_eq!(
            starts(&acts),
            vec![0],
            "the first init container runs again"
        );
        assert_eq!(condition(&st, "AllContainersRestarting"), Some(false));
        assert_eq!(condition(&st, "Initialized"), Some(true));
        assert_eq!(crate::pod::phase(&plan, &st), PodPhase::Pending);
        assert!(st.terminating.is_none());
        assert_eq!(st.containers[0].restart_count, 1);
        assert!(matches!(&st.containers[2].state, State::Waiting { .. }));
        assert_eq!(
            st.containers[2].last_state.as_ref().map(|t| t.exit_code),
            Some(137)
        );
        // And the rest follows in order.
        st.on_started(&plan, 0, now);
        now += 10;
        st.on_exited(&plan, 0, exit(0), now);
        run_up(&plan, &mut st, &mut now);
        assert_eq!(st.containers[1].restart_count, 1);
        assert_eq!(st.containers[2].restart_count, 1);
        assert_eq!(crate::pod::phase(&plan, &st), PodPhase::Running);
    }

    #[test]
    fn another_exit_code_restarts_only_the_sidecar() {
        let plan = ml_worker();
        let mut st = PodState::new(&plan);
        st.on_sandbox_ready(0);
        let mut now = 0;
        run_up(&plan, &mut st, &mut now);
        st.on_exited(&plan, 1, exit(1), now);
        let acts = step(&plan, &mut st, now);
        assert!(!acts.contains(&Action::Kill(2)));
        assert!(st.restarting_all.is_none());
        assert!(
            st.containers[1].restart_at.is_some() || starts(&acts) == vec![1],
            "{acts:?}"
        );
    }
}
