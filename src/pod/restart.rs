//! The restart rule: kubelet's `ShouldContainerBeRestarted` with the container-level
//! policy and rules of `ContainerShouldRestart` and `findMatchingContainerRestartRule`
//! (pkg/api/v1/pod/util.go, KEP-5307), `IsContainerRestartable` for a container killed
//! for a failed probe or hook, and the `RestartAllContainers` action (KEP-5532):
//! computed here only.

use super::plan::{ContainerPlan, Kind, PodPlan, RestartPolicy, RestartRule, RuleAction};
use super::state::{PodState, Terminated};

/// What follows a container's exit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AfterExit {
    /// It stays terminated.
    Stay,
    /// It is restarted (after its back-off).
    Restart,
    /// Every container of the pod is restarted in place (a matching
    /// `RestartAllContainers` rule).
    RestartAll,
}

/// What follows container `i`'s run that ended as `t`: nothing once the pod terminates or
/// restarts all its containers; a matching `RestartAllContainers` rule restarts them all,
/// whatever the policies say; after a kill of this container alone (`killed_alone`: a
/// failed probe or hook) it restarts if [`restartable`]; else by [`should_restart`].
pub fn after_exit(
    plan: &PodPlan,
    st: &PodState,
    i: usize,
    t: &Terminated,
    killed_alone: bool,
) -> AfterExit {
    if st.terminating.is_some() || st.terminal.is_some() || st.restarting_all.is_some() {
        return AfterExit::Stay;
    }
    let c = &plan.containers[i];
    if c.kind != Kind::Ephemeral
        && matching_rule(c, t.exit_code)
            .is_some_and(|r| r.action == RuleAction::RestartAllContainers)
    {
        return AfterExit::RestartAll;
    }
    let restart = if killed_alone {
        restartable(plan, c)
    } else {
        should_restart(plan, c, t)
    };
    if restart {
        AfterExit::Restart
    } else {
        AfterExit::Stay
    }
}

/// kubelet's `findMatchingContainerRestartRule`: the first rule whose `exitCodes` match.
pub fn matching_rule(c: &ContainerPlan, exit_code: i32) -> Option<&RestartRule> {
    c.restart_rules
        .iter()
        .find(|r| r.values.contains(&exit_code) == r.in_values)
}

/// kubelet's `IsContainerRestartable`: whether the container may restart at all (after a
/// kill for a failed probe or hook, whatever its exit code; and whether a failed init
/// container fails the pod). Sidecars always, ephemeral containers never; a container
/// with its own policy: a `Restart` rule or a policy other than Never; else the pod's.
pub fn restartable(plan: &PodPlan, c: &ContainerPlan) -> bool {
    match c.kind {
        Kind::Sidecar => return true,
        Kind::Ephemeral => return false,
        Kind::App | Kind::Init => {}
    }
    match c.restart_policy {
        Some(p) => {
            c.restart_rules
                .iter()
                .any(|r| r.action == RuleAction::Restart)
                || p != RestartPolicy::Never
        }
        None => plan.restart_policy != RestartPolicy::Never,
    }
}

/// kubelet's `ContainerShouldRestart` for a run that ended as `t`: the container's rules
/// in order (a `Restart` match restarts it), then its own policy, then the pod's.
/// `Always` restarts, `OnFailure` only a failure, `Never` nothing. Sidecars always
/// restart, ephemeral containers never. A plain init container that completed is done;
/// one that failed ([`Terminated::init_failed`]) is a failure whatever its exit code.
pub fn should_restart(plan: &PodPlan, c: &ContainerPlan, t: &Terminated) -> bool {
    let failed = match c.kind {
        Kind::Sidecar => return true,
        Kind::Ephemeral => return false,
        Kind::Init => {
            if !t.init_failed() {
                return false;
            }
            true
        }
        Kind::App => !t.succeeded(),
    };
    if c.restart_policy.is_some()
        && matching_rule(c, t.exit_code).is_some_and(|r| r.action == RuleAction::Restart)
    {
        return true;
    }
    match c.restart_policy.unwrap_or(plan.restart_policy) {
        RestartPolicy::Always => true,
        RestartPolicy::OnFailure => failed,
        RestartPolicy::Never => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod::plan::ContainerPlan;
    use crate::pod::TerminatedReason;

    fn plan_of(policy: RestartPolicy, c: ContainerPlan) -> PodPlan {
        PodPlan::bare(policy, vec![c])
    }

    fn ended(code: i32, reason: TerminatedReason) -> Terminated {
        Terminated {
            exit_code: code,
            signal: None,
            reason,
            message: None,
            started_at: Some(0),
            finished_at: Some(1),
        }
    }

    fn exit(code: i32) -> Terminated {
        let reason = if code == 0 {
            TerminatedReason::Completed
        } else {
            TerminatedReason::Error
        };
        ended(code, reason)
    }

    fn rule(action: RuleAction, in_values: bool, values: &[i32]) -> RestartRule {
        RestartRule {
            action,
            in_values,
            values: values.to_vec(),
        }
    }

    fn with(kind: Kind, policy: Option<RestartPolicy>, rules: Vec<RestartRule>) -> ContainerPlan {
        let mut c = ContainerPlan::bare("c", kind);
        c.restart_policy = policy;
        c.restart_rules = rules;
        c
    }

    #[test]
    fn by_policy_kind_and_exit_code() {
        use RestartPolicy::*;
        let oom0 = ended(0, TerminatedReason::OOMKilled);
        let oom137 = ended(137, TerminatedReason::OOMKilled);
        let done = ended(0, TerminatedReason::Completed);
        // (policy, kind, run, killed alone) → restarted
        let cases = [
            (Always, Kind::App, &done, false, true),
            (OnFailure, Kind::App, &done, false, false),
            (OnFailure, Kind::App, &oom0, false, false),
            (OnFailure, Kind::App, &oom137, false, true),
            (Never, Kind::App, &oom137, false, false),
            // An OOM-killed init container runs again even after exit 0 (isInitContainerFailed).
            (Always, Kind::Init, &oom0, false, true),
            (OnFailure, Kind::Init, &done, false, false),
            (Always, Kind::Init, &oom137, false, true),
            (Never, Kind::Sidecar, &done, false, true),
            (Always, Kind::Ephemeral, &oom137, false, false),
            (OnFailure, Kind::App, &done, true, true),
            (Never, Kind::App, &oom137, true, false),
        ];
        for (policy, kind, t, alone, want) in cases {
            let p = plan_of(policy, ContainerPlan::bare("c", kind));
            let st = PodState::new(&p);
            let want = if want {
                AfterExit::Restart
            } else {
                AfterExit::Stay
            };
            assert_eq!(
                after_exit(&p, &st, 0, t, alone),
                want,
                "{policy:?} {kind:?} {t:?} alone={alone}"
            );
        }
    }

    /// `ContainerShouldRestart`'s cases: rules first (in order, first match wins), then the
    /// container's policy, then the pod's; a `RestartAllContainers` match is no `Restart`.
    #[test]
    fn container_policy_and_rules_as_kubelet_decides() {
        use RestartPolicy::*;
        use RuleAction::*;
        let in42 = || rule(Restart, true, &[42]);
        // (what, pod policy, container policy, rules, exit code) → restarted
        type Case = (
            &'static str,
            RestartPolicy,
            Option<RestartPolicy>,
            Vec<RestartRule>,
            i32,
            bool,
        );
        let cases: Vec<Case> = vec![
            (
                "pod Always, no container policy",
                Always,
                None,
                vec![],
                0,
                true,
            ),
            ("pod OnFailure, exit 0", OnFailure, None, vec![], 0, false),
            ("pod OnFailure, exit 1", OnFailure, None, vec![], 1, true),
            ("pod Never", Never, None, vec![], 1, false),
            (
                "container Never overrides pod Always",
                Always,
                Some(Never),
                vec![],
                1,
                false,
            ),
            (
                "container Always overrides pod Never",
                Never,
                Some(Always),
                vec![],
                0,
                true,
            ),
            (
                "container OnFailure, exit 0",
                Never,
                Some(OnFailure),
                vec![],
                0,
                false,
            ),
            (
                "container OnFailure, exit 3",
                Never,
                Some(OnFailure),
                vec![],
                3,
                true,
            ),
            (
                "rule In matches",
                Never,
                Some(Never),
                vec![in42()],
                42,
                true,
            ),
            (
                "rule In does not match",
                Never,
                Some(Never),
                vec![in42()],
                1,
                false,
            ),
            (
                "rule NotIn matches",
                Never,
                Some(Never),
                vec![rule(Restart, false, &[0])],
                7,
                true,
            ),
            (
                "rule NotIn does not match",
                Never,
                Some(Never),
                vec![rule(Restart, false, &[0, 7])],
                7,
                false,
            ),
            (
                "no match falls back to the container's Always",
                Never,
                Some(Always),
                vec![in42()],
                0,
                true,
            ),
            (
                "first match wins",
                Never,
                Some(Never),
                vec![rule(RestartAllContainers, true, &[42]), in42()],
                42,
                false,
            ),
            (
                "later rules are read",
                Never,
                Some(Never),
                vec![rule(Restart, true, &[1]), in42()],
                42,
                true,
            ),
        ];
        for (what, pod, own, rules, code, want) in cases {
            let p = plan_of(pod, with(Kind::App, own, rules));
            assert_eq!(
                should_restart(&p, &p.containers[0], &exit(code)),
                want,
                "{what}"
            );
        }
    }

    #[test]
    fn an_init_container_with_its_own_policy() {
        use RestartPolicy::*;
        // The docs' init-once: restartPolicy Never under a pod's Always fails the pod.
        let p = plan_of(Always, with(Kind::Init, Some(Never), vec![]));
        assert!(!should_restart(&p, &p.containers[0], &exit(1)));
        assert!(!restartable(&p, &p.containers[0]));
        // Under a pod's Never, OnFailure retries it; a success is done either way.
        let p = plan_of(Never, with(Kind::Init, Some(OnFailure), vec![]));
        assert!(should_restart(&p, &p.containers[0], &exit(1)));
        assert!(!should_restart(&p, &p.containers[0], &exit(0)));
        assert!(restartable(&p, &p.containers[0]));
    }

    #[test]
    fn restartable_as_is_container_restartable() {
        use RestartPolicy::*;
        let cases = [
            (Never, None, vec![], false),
            (OnFailure, None, vec![], true),
            (Always, Some(Never), vec![], false),
            (
                Always,
                Some(Never),
                vec![rule(RuleAction::Restart, true, &[42])],
                true,
            ),
            (
                Always,
                Some(Never),
                vec![rule(RuleAction::RestartAllContainers, true, &[42])],
                false,
            ),
            (Never, Some(OnFailure), vec![], true),
        ];
        for (pod, own, rules, want) in cases {
            let p = plan_of(pod, with(Kind::App, own, rules));
            assert_eq!(restartable(&p, &p.containers[0]), want, "{pod:?} {own:?}");
        }
    }

    #[test]
    fn a_restart_all_rule_overrides_every_policy() {
        // The docs' ml-worker: a sidecar whose exit 88 restarts the whole pod.
        let mut p = plan_of(
            RestartPolicy::Never,
            with(
                Kind::Sidecar,
                None,
                vec![rule(RuleAction::RestartAllContainers, true, &[88])],
            ),
        );
        p.containers.push(ContainerPlan::bare("app", Kind::App));
        let st = PodState::new(&p);
        assert_eq!(
            after_exit(&p, &st, 0, &exit(88), false),
            AfterExit::RestartAll
        );
        assert_eq!(after_exit(&p, &st, 0, &exit(1), false), AfterExit::Restart);
        // An app container's NotIn rule with its own Never.
        let p = plan_of(
            RestartPolicy::Always,
            with(
                Kind::App,
                Some(RestartPolicy::Never),
                vec![rule(RuleAction::RestartAllContainers, false, &[0])],
            ),
        );
        let st = PodState::new(&p);
        assert_eq!(
            after_exit(&p, &st, 0, &exit(3), false),
            AfterExit::RestartAll
        );
        assert_eq!(after_exit(&p, &st, 0, &exit(0), false), AfterExit::Stay);
    }

    #[test]
    fn nothing_restarts_once_the_pod_terminates() {
        let p = plan_of(
            RestartPolicy::Always,
            ContainerPlan::bare("c", Kind::Sidecar),
        );
        let mut st = PodState::new(&p);
        st.request_termination(&p, 0, None);
        let t = ended(1, TerminatedReason::Error);
        assert_eq!(after_exit(&p, &st, 0, &t, false), AfterExit::Stay);
    }
}
