//! The restart rule (kubelet's `ShouldContainerBeRestarted`, and `shouldRestartOnFailure`
//! for a container killed for a failed probe or hook): computed here only.

use super::plan::{Kind, PodPlan, RestartPolicy};
use super::state::{PodState, Terminated};

/// Whether a container of `kind` whose run ended as `t` is restarted: never once the pod
/// terminates; after a kill of this container alone (`killed_alone`: a failed probe or
/// hook) unless the policy is Never, whatever its exit code; else by the policy and
/// [`Terminated::succeeded`] ([`Terminated::init_failed`] for a plain init container).
pub fn after_exit(
    plan: &PodPlan,
    st: &PodState,
    kind: Kind,
    t: &Terminated,
    killed_alone: bool,
) -> bool {
    if st.terminating.is_some() || st.terminal.is_some() {
        return false;
    }
    if killed_alone {
        restarts_after_kill(plan, kind)
    } else {
        let failed = match kind {
            Kind::Init => t.init_failed(),
            _ => !t.succeeded(),
        };
        should_restart(plan, kind, failed)
    }
}

/// After a kill for a failed probe or hook: restarted unless the pod's policy is Never
/// (sidecars always).
pub fn restarts_after_kill(plan: &PodPlan, kind: Kind) -> bool {
    match kind {
        Kind::Sidecar => true,
        Kind::Ephemeral => false,
        _ => plan.restart_policy != RestartPolicy::Never,
    }
}

/// The restart rule: `Never` → no; `OnFailure` → only a failure; `Always` → yes. Plain init
/// containers treat `Always` as `OnFailure`; sidecars always restart.
pub fn should_restart(plan: &PodPlan, kind: Kind, failed: bool) -> bool {
    use RestartPolicy::*;
    match (kind, plan.restart_policy) {
        (Kind::Sidecar, _) => true,
        (Kind::Ephemeral, _) => false,
        (_, Never) => false,
        (Kind::Init, _) | (Kind::App, OnFailure) => failed,
        (Kind::App, Always) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod::plan::ContainerPlan;
    use crate::pod::TerminatedReason;

    fn plan(policy: RestartPolicy) -> PodPlan {
        PodPlan::bare(policy, vec![ContainerPlan::bare("c", Kind::App)])
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
            let p = plan(policy);
            let st = PodState::new(&p);
            assert_eq!(
                after_exit(&p, &st, kind, t, alone),
                want,
                "{policy:?} {kind:?} {t:?} alone={alone}"
            );
        }
    }

    #[test]
    fn nothing_restarts_once_the_pod_terminates() {
        let p = plan(RestartPolicy::Always);
        let mut st = PodState::new(&p);
        st.request_termination(&p, 0, None);
        let t = ended(1, TerminatedReason::Error);
        assert!(!after_exit(&p, &st, Kind::Sidecar, &t, false));
    }
}
