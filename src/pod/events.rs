//! Events about things the supervisor observes outside `step` (admission results, a
//! container's OOM kill, a probe's warning, a failed hook): their type, reason and text
//! are decided here; the supervisor records them when it sees the cause.

use super::plan::PodPlan;
use super::probes::ProbeKind;
use super::reason::{EventReason, EventType};
use super::step::EventSpec;

/// The pod as kubelet names it in messages: `name_namespace(uid)`.
pub fn pod_full_name(plan: &PodPlan) -> String {
    format!("{}_{}({})", plan.name, plan.namespace, plan.uid)
}

fn warning(reason: EventReason, message: String, container: Option<usize>) -> EventSpec {
    EventSpec {
        type_: EventType::Warning,
        reason,
        message,
        container,
    }
}

/// `dnsPolicy: ClusterFirst` fell back to the node's resolv.conf (kubelet's wording).
pub fn missing_cluster_dns(plan: &PodPlan) -> EventSpec {
    let message = format!(
        "pod: \"{}\". kubelet does not have ClusterDNS IP configured and cannot create Pod using \"ClusterFirst\" policy. Falling back to \"Default\" policy.",
        pod_full_name(plan)
    );
    warning(EventReason::MissingClusterDNS, message, None)
}

/// The pod's pause died and is made again for the next container start: kubelet's event
/// when it finds a pod's sandbox gone.
pub fn sandbox_changed() -> EventSpec {
    EventSpec {
        type_: EventType::Normal,
        reason: EventReason::SandboxChanged,
        message: "Pod sandbox changed, it will be killed and re-created.".into(),
        container: None,
    }
}

/// Matching PodPresets conflicted, so none was applied; `why` says how.
pub fn preset_conflict(why: &str) -> EventSpec {
    warning(EventReason::PodPresetConflict, why.to_string(), None)
}

/// A pod run without root has no cgroups (`pod::rootless`).
pub fn cgroups_unavailable(message: &str) -> EventSpec {
    warning(EventReason::CgroupsUnavailable, message.to_string(), None)
}

/// Container `i`'s environment has variable names that are not C identifiers.
pub fn invalid_env_names(i: usize, warning_text: &str) -> EventSpec {
    warning(
        EventReason::InvalidEnvironmentVariableNames,
        warning_text.to_string(),
        Some(i),
    )
}

/// The kernel's OOM killer killed in container `i`'s cgroup during its run.
pub fn oom_killing(plan: &PodPlan, i: usize) -> EventSpec {
    let name = &plan.containers[i].name;
    warning(
        EventReason::OOMKilling,
        format!("Memory cgroup out of memory: container {name} was killed"),
        Some(i),
    )
}

/// A probe handler's warning (an HTTP redirect to another host, say).
pub fn probe_warning(i: usize, kind: ProbeKind, text: &str) -> EventSpec {
    warning(
        EventReason::ProbeWarning,
        format!("{} probe warning: {text}", kind.title()),
        Some(i),
    )
}

/// Container `i`'s preStop hook failed. As kubelet: the hook's output (which may hold
/// secrets) goes to the log only, never into the event.
pub fn pre_stop_failed(i: usize) -> EventSpec {
    warning(
        EventReason::FailedPreStopHook,
        "PreStopHook failed".into(),
        Some(i),
    )
}

/// kubelet's text of a failed lifecycle hook, for the log and the container's waiting
/// message. `what`: the handler as kubelet prints it (`[cmd args]` for exec, the path for
/// HTTP); `exit`: how an exec handler's process ended (`exited with 1`), if it did.
pub fn hook_failure(
    plan: &PodPlan,
    i: usize,
    what: &str,
    output: &str,
    exit: Option<&str>,
) -> String {
    let kind = if what.starts_with('[') {
        "Exec"
    } else {
        "HTTP"
    };
    let detail = match exit {
        Some(how) => format!(
            "command '{}' {how}: {output}, message: {output:?}",
            what.strip_prefix('[')
                .and_then(|w| w.strip_suffix(']'))
                .unwrap_or(what),
        ),
        None => output.to_string(),
    };
    format!(
        "{kind} lifecycle hook ({what}) for Container {:?} in Pod {:?} failed - error: {detail}",
        plan.containers[i].name,
        pod_full_name(plan)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod::plan::{ContainerPlan, Kind, RestartPolicy};

    fn plan() -> PodPlan {
        PodPlan {
            namespace: "ns".into(),
            uid: "u1".into(),
            ..PodPlan::bare(
                RestartPolicy::Always,
                vec![ContainerPlan::bare("web", Kind::App)],
            )
        }
    }

    #[test]
    fn texts_are_kubelets() {
        let p = plan();
        let e = missing_cluster_dns(&p);
        assert_eq!(
            (e.type_, e.reason),
            (EventType::Warning, EventReason::MissingClusterDNS)
        );
        assert!(e
            .message
            .starts_with("pod: \"p_ns(u1)\". kubelet does not have ClusterDNS"));
        assert_eq!(e.container, None);
        let e = oom_killing(&p, 0);
        assert_eq!(
            e.message,
            "Memory cgroup out of memory: container web was killed"
        );
        assert_eq!(e.container, Some(0));
        assert_eq!(
            probe_warning(0, ProbeKind::Readiness, "redirect").message,
            "Readiness probe warning: redirect"
        );
        assert_eq!(pre_stop_failed(0).message, "PreStopHook failed");
        assert_eq!(preset_conflict("x").reason, EventReason::PodPresetConflict);
        assert_eq!(invalid_env_names(0, "w").container, Some(0));
        let e = sandbox_changed();
        assert_eq!(
            (e.type_, e.reason, e.message.as_str(), e.container),
            (
                EventType::Normal,
                EventReason::SandboxChanged,
                "Pod sandbox changed, it will be killed and re-created.",
                None
            )
        );
    }

    #[test]
    fn hook_failures_are_worded_as_kubelet_words_them() {
        let p = plan();
        assert_eq!(
            hook_failure(&p, 0, "[sh -c exit 3]", "oops", Some("exited with 3")),
            "Exec lifecycle hook ([sh -c exit 3]) for Container \"web\" in Pod \"p_ns(u1)\" failed - error: command 'sh -c exit 3' exited with 3: oops, message: \"oops\""
        );
        assert_eq!(
            hook_failure(&p, 0, "/hook", "HTTP 500", None),
            "HTTP lifecycle hook (/hook) for Container \"web\" in Pod \"p_ns(u1)\" failed - error: HTTP 500"
        );
    }
}
