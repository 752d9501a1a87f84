//! A pod run without root (docs/interface.md §Without root): whether its cgroups can be
//! used, and what it asked of them that goes unenforced when they cannot. As rootless
//! podman with the cgroupfs manager, the pod runs without cgroups rather than being
//! refused, but never silently: one Warning event names every limit that is not enforced.

use k8s_openapi::api::core::v1::PodSpec;

/// Where a rootless pod's cgroups stand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cgroups {
    /// A cgroup v2 subtree the user may write: the pod cgroup and its limits work as root's.
    Delegated,
    /// cgroup v1 or hybrid: an unprivileged user cannot make cgroups there.
    V1,
    /// cgroup v2, but the cgroup podinit runs in (or `--cgroup-parent`) is not the user's.
    NotDelegated,
}

/// The decision, from the hierarchy and whether the parent cgroup is writable by the user.
/// runc's rootless rule (ignore cgroup errors only when no resources are set) would fail a
/// pod for any request; podman's (warn and ignore) runs it: podinit runs it and says so.
pub fn cgroups(v2: bool, parent_writable: bool) -> Cgroups {
    match (v2, parent_writable) {
        (true, true) => Cgroups::Delegated,
        (true, false) => Cgroups::NotDelegated,
        (false, _) => Cgroups::V1,
    }
}

/// Why a pod runs without cgroups, for its event; None when it has them.
pub fn why_without(c: Cgroups) -> Option<&'static str> {
    match c {
        Cgroups::Delegated => None,
        Cgroups::V1 => Some("cgroup v1 (or hybrid) cannot be delegated to a user"),
        Cgroups::NotDelegated => {
            Some("no cgroup v2 subtree is delegated to the user (systemd's user@.service Delegate=, or a cgroup chowned to the user)")
        }
    }
}

/// Every resource the pod's containers (init, sidecars, app) and the pod itself ask for,
/// as `container "NAME": limits.memory=64Mi`: what a cgroup would have enforced.
pub fn asked(spec: &PodSpec) -> Vec<String> {
    let mut out = Vec::new();
    let mut add = |who: String, r: Option<&k8s_openapi::api::core::v1::ResourceRequirements>| {
        let Some(r) = r else { return };
        for (kind, m) in [("limits", &r.limits), ("requests", &r.requests)] {
            for (k, v) in m.iter().flatten() {
                out.push(format!("{who}: {kind}.{k}={}", v.0));
            }
        }
    };
    for c in spec
        .init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
    {
        add(format!("container {:?}", c.name), c.resources.as_ref());
    }
    add("pod".to_string(), spec.resources.as_ref());
    out
}

/// The Warning event's text for a pod that runs without cgroups.
pub fn without_message(why: &str, asked: &[String]) -> String {
    let enforced = if asked.is_empty() {
        "the pod asks for no limits".to_string()
    } else {
        format!("not enforced: {}", asked.join(", "))
    };
    format!(
        "running without cgroups ({why}): no limits, OOM kills are reported as Error, and processes left by a container are killed through its pid namespace only; {enforced}"
    )
}

/// What a pod asks that a user without root cannot have, as one line naming the field
/// (exit 2, nothing made): a privileged container (every capability over the host and its
/// devices), and the host's PID and IPC namespaces, whose /proc and mqueue a user
/// namespace may not mount.
pub fn refusal(spec: &PodSpec) -> Option<String> {
    use k8s_openapi::api::core::v1::SecurityContext;
    let privileged = |sc: Option<&SecurityContext>| sc.and_then(|s| s.privileged) == Some(true);
    let inits = spec.init_containers.iter().flatten();
    let ephemeral = spec.ephemeral_containers.iter().flatten();
    let found = (inits.enumerate())
        .find(|(_, c)| privileged(c.security_context.as_ref()))
        .map(|(i, _)| ("initContainers", i))
        .or_else(|| {
            (spec.containers.iter().enumerate())
                .find(|(_, c)| privileged(c.security_context.as_ref()))
                .map(|(i, _)| ("containers", i))
        })
        .or_else(|| {
            ephemeral
                .enumerate()
                .find(|(_, c)| privileged(c.security_context.as_ref()))
                .map(|(i, _)| ("ephemeralContainers", i))
        });
    if let Some((list, i)) = found {
        return Some(format!(
            "spec.{list}[{i}].securityContext.privileged: a privileged container needs root (podinit runs without it)"
        ));
    }
    if spec.host_pid == Some(true) {
        return Some(
            "spec.hostPID: without root the pod cannot share the host's PID namespace (a user namespace may not mount its /proc)".into(),
        );
    }
    if spec.host_ipc == Some(true) {
        return Some(
            "spec.hostIPC: without root the pod cannot share the host's IPC namespace (a user namespace may not mount its mqueue)".into(),
        );
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_decision() {
        assert_eq!(cgroups(true, true), Cgroups::Delegated);
        assert_eq!(cgroups(true, false), Cgroups::NotDelegated);
        assert_eq!(cgroups(false, true), Cgroups::V1);
        assert_eq!(why_without(Cgroups::Delegated), None);
        assert!(why_without(Cgroups::V1).unwrap().contains("v1"));
    }

    #[test]
    fn every_limit_is_named() {
        let spec: PodSpec = serde_json::from_value(serde_json::json!({
            "initContainers": [{"name": "init", "resources": {"limits": {"cpu": "100m"}}}],
            "containers": [
                {"name": "app", "resources": {"limits": {"memory": "64Mi"}, "requests": {"memory": "32Mi"}}},
                {"name": "plain"}
            ]
        }))
        .unwrap();
        let a = asked(&spec);
        assert_eq!(
            a,
            [
                "container \"init\": limits.cpu=100m",
                "container \"app\": limits.memory=64Mi",
                "container \"app\": requests.memory=32Mi"
            ]
        );
        assert!(
            without_message("v1", &a).contains("not enforced: container \"init\": limits.cpu=100m")
        );
        assert!(without_message("v1", &[]).ends_with("the pod asks for no limits"));
    }

    #[test]
    fn refusals_name_the_field() {
        let spec = |v: serde_json::Value| -> PodSpec { serde_json::from_value(v).unwrap() };
        let ok = spec(serde_json::json!({"containers": [{"name": "a"}]}));
        assert_eq!(refusal(&ok), None);
        let p = spec(serde_json::json!({"containers": [
            {"name": "a"}, {"name": "b", "securityContext": {"privileged": true}}
        ]}));
        assert!(refusal(&p)
            .unwrap()
            .starts_with("spec.containers[1].securityContext.privileged: "));
        let p = spec(serde_json::json!({"initContainers": [
            {"name": "i", "securityContext": {"privileged": true}}
        ], "containers": [{"name": "a"}]}));
        assert!(refusal(&p)
            .unwrap()
            .starts_with("spec.initContainers[0].securityContext.privileged: "));
        let p = spec(serde_json::json!({"hostPID": true, "containers": [{"name": "a"}]}));
        assert!(refusal(&p).unwrap().starts_with("spec.hostPID: "));
        let p = spec(serde_json::json!({"hostIPC": true, "containers": [{"name": "a"}]}));
        assert!(refusal(&p).unwrap().starts_with("spec.hostIPC: "));
    }
}
