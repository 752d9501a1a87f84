//! Admission of an ephemeral container added to the running pod
//! (`POST /v1/ephemeralcontainers`), as the API server's `validateEphemeralContainers`:
//! the fields an ephemeral container may not have, a unique name, a target that exists.
//! The result is a defaulted `Container` for the runtime; the pod's spec keeps it as an
//! `EphemeralContainer` (`ephemeral`), read back as a container with `as_container`.

use k8s_openapi::api::core::v1::{Container, EphemeralContainer, PodSpec};

use super::Error;

/// Validate `ec` as the `index`-th ephemeral container of the pod and return it as a
/// container, defaulted.
pub fn validate(ec: &EphemeralContainer, spec: &PodSpec, index: usize) -> Result<Container, Error> {
    let p = format!("spec.ephemeralContainers[{index}]");
    let e = |f: &str, m: String| Err(Error::new(format!("{p}.{f}"), m));
    if ec.name.is_empty() {
        return e("name", "Required value".into());
    }
    super::validate::dns1123_label(format!("{p}.name"), &ec.name)?;
    let taken = spec
        .init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
        .map(|c| &c.name)
        .chain(spec.ephemeral_containers.iter().flatten().map(|c| &c.name))
        .any(|n| *n == ec.name);
    if taken {
        return e("name", format!("Duplicate value: {:?}", ec.name));
    }
    if ec.image.as_deref().unwrap_or("").is_empty() {
        return e("image", "Required value".into());
    }
    let forbidden = "Forbidden: cannot be set for an Ephemeral Container";
    for (f, set) in [
        ("ports", ec.ports.as_ref().is_some_and(|v| !v.is_empty())),
        ("livenessProbe", ec.liveness_probe.is_some()),
        ("readinessProbe", ec.readiness_probe.is_some()),
        ("startupProbe", ec.startup_probe.is_some()),
        ("lifecycle", ec.lifecycle.is_some()),
        (
            "resizePolicy",
            ec.resize_policy.as_ref().is_some_and(|v| !v.is_empty()),
        ),
        ("restartPolicy", ec.restart_policy.is_some()),
        (
            "resources",
            ec.resources.as_ref().is_some_and(|r| {
                r.limits.as_ref().is_some_and(|m| !m.is_empty())
                    || r.requests.as_ref().is_some_and(|m| !m.is_empty())
            }),
        ),
    ] {
        if set {
            return e(f, forbidden.into());
        }
    }
    for (i, m) in ec.volume_mounts.iter().flatten().enumerate() {
        if m.sub_path.as_deref().is_some_and(|s| !s.is_empty()) {
            return e(
                &format!("volumeMounts[{i}].subPath"),
                "Forbidden: cannot be set for an Ephemeral Container".into(),
            );
        }
        if m.sub_path_expr.as_deref().is_some_and(|s| !s.is_empty()) {
            return e(
                &format!("volumeMounts[{i}].subPathExpr"),
                "Forbidden: cannot be set for an Ephemeral Container".into(),
            );
        }
    }
    if let Some(t) = ec.target_container_name.as_deref() {
        let found = spec
            .init_containers
            .iter()
            .flatten()
            .chain(&spec.containers)
            .any(|c| c.name == t);
        if !found {
            return e("targetContainerName", format!("Not found: {t:?}"));
        }
    }
    // The rest is a container like any other: the same fields, the same rules.
    let mut c = as_container(ec);
    super::defaults::container(&mut c);
    let mut pod = k8s_openapi::api::core::v1::Pod {
        spec: Some(PodSpec {
            containers: vec![c.clone()],
            volumes: spec.volumes.clone(),
            ..Default::default()
        }),
        ..Default::default()
    };
    pod.metadata.name = Some("ephemeral".into());
    let rename =
        |err: Error| Error::new(err.field.replacen("spec.containers[0]", &p, 1), err.message);
    super::strict::unsupported(&pod).map_err(rename)?;
    super::validate::pod(&pod).map_err(rename)?;
    Ok(c)
}

/// The two conversions between the types, field by field: Kubernetes' Go types make an
/// `EphemeralContainerCommon` a `Container` by a type conversion. No `..` in the patterns,
/// so that a field added to either type is a compile error here.
macro_rules! conversions {
    ($($f:ident),* $(,)?) => {
        /// `ec` as the container it runs as (kubelet's `(*v1.Container)(&ec.EphemeralContainerCommon)`).
        pub fn as_container(ec: &EphemeralContainer) -> Container {
            let EphemeralContainer { $($f,)* target_container_name: _ } = ec;
            Container { $($f: $f.clone(),)* }
        }

        /// Container `c` as the pod's spec keeps it among its ephemeral containers.
        pub fn ephemeral(c: Container, target_container_name: Option<String>) -> EphemeralContainer {
            let Container { $($f,)* } = c;
            EphemeralContainer { $($f,)* target_container_name }
        }
    };
}

conversions!(
    args,
    command,
    env,
    env_from,
    image,
    image_pull_policy,
    lifecycle,
    liveness_probe,
    name,
    ports,
    readiness_probe,
    resize_policy,
    resources,
    restart_policy,
    restart_policy_rules,
    security_context,
    startup_probe,
    stdin,
    stdin_once,
    termination_message_path,
    termination_message_policy,
    tty,
    volume_devices,
    volume_mounts,
    working_dir,
);

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> PodSpec {
        serde_yaml_ng::from_str(
            "containers: [{name: web, image: busybox}]\nvolumes: [{name: v, emptyDir: {}}]",
        )
        .unwrap()
    }

    fn ec(yaml: &str) -> EphemeralContainer {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    #[test]
    fn an_ephemeral_container_is_admitted_with_defaults() {
        let c = validate(
            &ec("{name: dbg, image: busybox, command: [ps], targetContainerName: web, volumeMounts: [{name: v, mountPath: /v}]}"),
            &spec(),
            0,
        )
        .unwrap();
        assert_eq!(c.name, "dbg");
        assert_eq!(c.termination_message_policy.as_deref(), Some("File"));
    }

    #[test]
    fn a_container_and_its_ephemeral_form_hold_the_same_fields() {
        let e = ec("{name: dbg, image: busybox, command: [ps], args: [-o, pid], tty: true, stdin: true, targetContainerName: web, volumeMounts: [{name: v, mountPath: /v}]}");
        let c = as_container(&e);
        assert_eq!(c.command, e.command);
        assert_eq!(c.args, e.args);
        assert_eq!(c.tty, Some(true));
        assert_eq!(c.volume_mounts, e.volume_mounts);
        assert_eq!(ephemeral(c, e.target_container_name.clone()), e);
    }

    #[test]
    fn what_an_ephemeral_container_may_not_have() {
        for (yaml, want) in [
            (
                "{name: dbg, image: busybox, ports: [{containerPort: 80}]}",
                "spec.ephemeralContainers[0].ports: Forbidden",
            ),
            (
                "{name: dbg, image: busybox, readinessProbe: {exec: {command: ['true']}}}",
                "spec.ephemeralContainers[0].readinessProbe: Forbidden",
            ),
            (
                "{name: dbg, image: busybox, lifecycle: {preStop: {sleep: {seconds: 1}}}}",
                "spec.ephemeralContainers[0].lifecycle: Forbidden",
            ),
            (
                "{name: dbg, image: busybox, resources: {limits: {cpu: 1}}}",
                "spec.ephemeralContainers[0].resources: Forbidden",
            ),
            (
                "{name: web, image: busybox}",
                "spec.ephemeralContainers[0].name: Duplicate value: \"web\"",
            ),
            (
                "{name: Dbg, image: busybox}",
                "spec.ephemeralContainers[0].name: Invalid value",
            ),
            (
                "{name: dbg}",
                "spec.ephemeralContainers[0].image: Required value",
            ),
            (
                "{name: dbg, image: busybox, targetContainerName: nope}",
                "spec.ephemeralContainers[0].targetContainerName: Not found",
            ),
            (
                "{name: dbg, image: busybox, volumeMounts: [{name: w, mountPath: /w}]}",
                "spec.ephemeralContainers[0].volumeMounts[0].name: Not found",
            ),
        ] {
            let e = validate(&ec(yaml), &spec(), 0).unwrap_err();
            let got = format!("{}: {}", e.field, e.message);
            assert!(got.starts_with(want), "got {got:?}, want {want:?}");
        }
    }
}
