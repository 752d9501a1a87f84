//! Validation, in the spirit and wording of Kubernetes' `ValidatePod`. The first error
//! found is returned, in a fixed order.

use super::Error;
use k8s_openapi::api::core::v1::{
    Container, ExecAction, HTTPGetAction, LifecycleHandler, Pod, Probe, SeccompProfile,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::BTreeSet;

type R = Result<(), Error>;

fn err(field: impl Into<String>, msg: impl Into<String>) -> R {
    Err(Error::new(field, msg))
}

/// Kubernetes' regular expression for a label, `[a-z0-9]([-a-z0-9]*[a-z0-9])?`. Its
/// length limit is a check of its own (a subdomain's labels have none but the whole's).
fn dns1123_label_chars(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// `field` must be an RFC 1123 label; Kubernetes' first message when it is not.
pub fn dns1123_label(field: impl Into<String>, v: &str) -> R {
    if v.len() > 63 {
        return err(
            field,
            format!("Invalid value: {v:?}: must be no more than 63 characters"),
        );
    }
    if !dns1123_label_chars(v) {
        return err(field, format!("Invalid value: {v:?}: {LABEL_MSG}"));
    }
    Ok(())
}

/// `field` must be an RFC 1123 subdomain; Kubernetes' first message when it is not.
fn dns1123_subdomain(field: impl Into<String>, v: &str) -> R {
    if v.len() > 253 {
        return err(
            field,
            format!("Invalid value: {v:?}: must be no more than 253 characters"),
        );
    }
    if !v.split('.').all(dns1123_label_chars) {
        return err(field, format!("Invalid value: {v:?}: {SUBDOMAIN_MSG}"));
    }
    Ok(())
}

pub fn pod(pod: &Pod) -> R {
    let name = pod.metadata.name.as_deref().unwrap_or("");
    if name.is_empty() {
        return err(
            "metadata.name",
            "Required value: name or generateName is required",
        );
    }
    dns1123_subdomain("metadata.name", name)?;
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    dns1123_label("metadata.namespace", ns)?;
    let Some(spec) = &pod.spec else {
        return err("spec", "Required value");
    };
    if let Some(os) = &spec.os {
        if os.name != "linux" {
            return err(
                "spec.os.name",
                format!("Unsupported value: {:?}: supported values: \"linux\" (podinit runs Linux containers)", os.name),
            );
        }
    }
    dns(spec)?;
    if spec.share_process_namespace == Some(true) && spec.host_pid == Some(true) {
        return err(
            "spec.shareProcessNamespace",
            "Invalid value: true: ShareProcessNamespace and HostPID cannot both be enabled",
        );
    }
    if let Some(sp) = spec
        .security_context
        .as_ref()
        .and_then(|s| s.seccomp_profile.as_ref())
    {
        seccomp_profile(sp, "spec.securityContext.seccompProfile")?;
    }
    for (i, sc) in spec
        .security_context
        .iter()
        .flat_map(|s| s.sysctls.iter().flatten())
        .enumerate()
    {
        if let Some(why) = crate::pod::sysctls::refusal(
            &sc.name,
            spec.host_network == Some(true),
            spec.host_ipc == Some(true),
        ) {
            return err(
                format!("spec.securityContext.sysctls[{i}].name"),
                format!("Forbidden: {why}"),
            );
        }
    }
    let rp = spec.restart_policy.as_deref().unwrap_or("Always");
    if !["Always", "OnFailure", "Never"].contains(&rp) {
        return err(
            "spec.restartPolicy",
            format!(
                "Unsupported value: {rp:?}: supported values: \"Always\", \"OnFailure\", \"Never\""
            ),
        );
    }
    if spec.termination_grace_period_seconds.is_some_and(|g| g < 0) {
        return err(
            "spec.terminationGracePeriodSeconds",
            "Invalid value: must be >= 0",
        );
    }
    if let Some(d) = spec.active_deadline_seconds {
        if d < 1 {
            return err(
                "spec.activeDeadlineSeconds",
                format!("Invalid value: {d}: must be between 1 and 2147483647, inclusive"),
            );
        }
    }
    if let Some(h) = &spec.hostname {
        dns1123_label("spec.hostname", h)?;
    }
    // Volumes.
    let mut vols = BTreeSet::new();
    for (i, v) in spec.volumes.iter().flatten().enumerate() {
        let p = format!("spec.volumes[{i}]");
        dns1123_label(format!("{p}.name"), &v.name)?;
        if !vols.insert(v.name.clone()) {
            return err(
                format!("{p}.name"),
                format!("Duplicate value: {:?}", v.name),
            );
        }
        let sources = serde_json::to_value(v)
            .ok()
            .and_then(|o| {
                o.as_object()
                    .map(|m| m.keys().filter(|k| *k != "name").count())
            })
            .unwrap_or(0);
        if sources == 0 {
            return err(&p, "Required value: must specify a volume type");
        }
        if sources > 1 {
            return err(&p, "Forbidden: may not specify more than 1 volume type");
        }
        if let Some(hp) = &v.host_path {
            if hp.path.is_empty() {
                return err(format!("{p}.hostPath.path"), "Required value");
            }
            let ty = hp.type_.as_deref().unwrap_or("");
            let ok = [
                "",
                "DirectoryOrCreate",
                "Directory",
                "FileOrCreate",
                "File",
                "Socket",
                "CharDevice",
                "BlockDevice",
            ];
            if !ok.contains(&ty) {
                return err(
                    format!("{p}.hostPath.type"),
                    format!("Unsupported value: {ty:?}"),
                );
            }
        }
        if let Some(ed) = &v.empty_dir {
            if let Some(m) = ed.medium.as_deref() {
                if !["", "Memory"].contains(&m) {
                    return err(
                        format!("{p}.emptyDir.medium"),
                        format!("Unsupported value: {m:?}: supported values: \"\", \"Memory\""),
                    );
                }
            }
            if let Some(q) = &ed.size_limit {
                crate::quantity::parse(&q.0).map_err(|e| {
                    Error::new(
                        format!("{p}.emptyDir.sizeLimit"),
                        format!("Invalid value: {e}"),
                    )
                })?;
            }
        }
    }
    // Containers.
    if spec.containers.is_empty() {
        return err("spec.containers", "Required value");
    }
    let mut names = BTreeSet::new();
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        container(
            c,
            &format!("spec.initContainers[{i}]"),
            true,
            &vols,
            &mut names,
        )?;
    }
    for (i, c) in spec.containers.iter().enumerate() {
        container(
            c,
            &format!("spec.containers[{i}]"),
            false,
            &vols,
            &mut names,
        )?;
    }
    for (i, g) in spec.readiness_gates.iter().flatten().enumerate() {
        if g.condition_type.is_empty() {
            return err(
                format!("spec.readinessGates[{i}].conditionType"),
                "Required value",
            );
        }
    }
    Ok(())
}

fn container(
    c: &Container,
    p: &str,
    init: bool,
    vols: &BTreeSet<String>,
    names: &mut BTreeSet<String>,
) -> R {
    if c.name.is_empty() {
        return err(format!("{p}.name"), "Required value");
    }
    dns1123_label(format!("{p}.name"), &c.name)?;
    if !names.insert(c.name.clone()) {
        return err(
            format!("{p}.name"),
            format!("Duplicate value: {:?}", c.name),
        );
    }
    if c.image.as_deref().unwrap_or("").trim().is_empty() {
        return err(format!("{p}.image"), "Required value");
    }
    if let Some(sc) = &c.security_context {
        if let Some(sp) = &sc.seccomp_profile {
            seccomp_profile(sp, &format!("{p}.securityContext.seccompProfile"))?;
        }
        if sc.privileged == Some(true) && sc.allow_privilege_escalation == Some(false) {
            return err(
                format!("{p}.securityContext"),
                "Invalid value: cannot set `allowPrivilegeEscalation` to false and `privileged` to true",
            );
        }
        match sc.proc_mount.as_deref() {
            None | Some("Default") => {}
            // Unmasked needs a user namespace (hostUsers: false), which podinit does not make.
            Some("Unmasked") => {
                return err(
                    format!("{p}.securityContext.procMount"),
                    "Invalid value: \"Unmasked\": `hostUsers` must be false to use `Unmasked`",
                )
            }
            Some(v) => {
                return err(
                    format!("{p}.securityContext.procMount"),
                    format!(
                        "Unsupported value: {v:?}: supported values: \"Default\", \"Unmasked\""
                    ),
                )
            }
        }
    }
    let sidecar = match c.restart_policy.as_deref() {
        None => false,
        Some("Always") if init => true,
        Some(v) if init => {
            return err(
                format!("{p}.restartPolicy"),
                format!("Unsupported value: {v:?}: supported values: \"Always\""),
            );
        }
        Some(_) => {
            return err(
                format!("{p}.restartPolicy"),
                "Forbidden: may not be set for non-init containers",
            )
        }
    };
    if init && !sidecar {
        for (f, set) in [
            (
                "lifecycle",
                c.lifecycle
                    .as_ref()
                    .is_some_and(|l| l.post_start.is_some() || l.pre_stop.is_some()),
            ),
            ("livenessProbe", c.liveness_probe.is_some()),
            ("readinessProbe", c.readiness_probe.is_some()),
            ("startupProbe", c.startup_probe.is_some()),
        ] {
            if set {
                return err(
                    format!("{p}.{f}"),
                    "Forbidden: may not be set for init containers without restartPolicy=Always",
                );
            }
        }
    }
    for (f, probe) in [
        ("livenessProbe", &c.liveness_probe),
        ("startupProbe", &c.startup_probe),
    ] {
        if probe
            .as_ref()
            .and_then(|pr| pr.success_threshold)
            .is_some_and(|s| s != 1)
        {
            return err(
                format!("{p}.{f}.successThreshold"),
                "Invalid value: must be 1",
            );
        }
    }
    for (f, probe) in [
        ("livenessProbe", &c.liveness_probe),
        ("readinessProbe", &c.readiness_probe),
        ("startupProbe", &c.startup_probe),
    ] {
        if let Some(pr) = probe {
            probe_handler(pr, &format!("{p}.{f}"))?;
        }
    }
    if let Some(lc) = &c.lifecycle {
        for (f, h) in [("postStart", &lc.post_start), ("preStop", &lc.pre_stop)] {
            if let Some(h) = h {
                hook_handler(h, &format!("{p}.lifecycle.{f}"))?;
            }
        }
    }
    if let Some(sig) = c.lifecycle.as_ref().and_then(|l| l.stop_signal.as_deref()) {
        crate::bundle::signal::parse(sig).map_err(|e| {
            Error::new(
                format!("{p}.lifecycle.stopSignal"),
                format!("Unsupported value: {e}"),
            )
        })?;
    }
    for (i, e) in c.env.iter().flatten().enumerate() {
        if e.name.is_empty() || e.name.contains('=') {
            return err(format!("{p}.env[{i}].name"), format!("Invalid value: {:?}: a valid environment variable name must consist only of printable ASCII characters other than '='", e.name));
        }
        if let Some(src) = &e.value_from {
            value_from(src, e.value.is_some(), &format!("{p}.env[{i}].valueFrom"))?;
        }
    }
    for (i, f) in c.env_from.iter().flatten().enumerate() {
        let fp = format!("{p}.envFrom[{i}]");
        match (&f.config_map_ref, &f.secret_ref) {
            (None, None) => {
                return err(
                    fp,
                    "Required value: must specify one of: `configMapRef` or `secretRef`",
                )
            }
            (Some(_), Some(_)) => {
                return err(
                    fp,
                    "Invalid value: may not have more than one field specified at a time",
                )
            }
            (Some(r), None) if r.name.is_empty() => {
                return err(format!("{fp}.configMapRef.name"), "Required value")
            }
            (None, Some(r)) if r.name.is_empty() => {
                return err(format!("{fp}.secretRef.name"), "Required value")
            }
            _ => {}
        }
    }
    let mut paths = BTreeSet::new();
    for (i, m) in c.volume_mounts.iter().flatten().enumerate() {
        let mp = format!("{p}.volumeMounts[{i}]");
        if !vols.contains(&m.name) {
            return err(format!("{mp}.name"), format!("Not found: {:?}", m.name));
        }
        if m.mount_path.is_empty() {
            return err(format!("{mp}.mountPath"), "Required value");
        }
        if !paths.insert(m.mount_path.clone()) {
            return err(
                format!("{mp}.mountPath"),
                format!("Invalid value: {:?}: must be unique", m.mount_path),
            );
        }
        if let Some(sp) = m.sub_path.as_deref() {
            let path = std::path::Path::new(sp);
            if path.is_absolute()
                || path
                    .components()
                    .any(|c| c == std::path::Component::ParentDir)
            {
                return err(
                    format!("{mp}.subPath"),
                    format!("Invalid value: {sp:?}: must be a relative path without '..'"),
                );
            }
        }
    }
    if let Some(r) = &c.resources {
        for (which, map) in [("limits", &r.limits), ("requests", &r.requests)] {
            for (k, q) in map.iter().flatten() {
                let standard = ["cpu", "memory", "ephemeral-storage"].contains(&k.as_str())
                    || k.starts_with("hugepages-");
                if !standard {
                    return err(format!("{p}.resources.{which}[{k}]"), format!("Invalid value: {k:?}: must be a standard resource type or fully qualified"));
                }
                let v = crate::quantity::parse(&q.0).map_err(|e| {
                    Error::new(
                        format!("{p}.resources.{which}[{k}]"),
                        format!("Invalid value: {e}"),
                    )
                })?;
                if v.milli() < 0 {
                    return err(
                        format!("{p}.resources.{which}[{k}]"),
                        format!(
                            "Invalid value: {:?}: must be greater than or equal to 0",
                            q.0
                        ),
                    );
                }
            }
        }
        for (k, req) in r.requests.iter().flatten() {
            if let Some(lim) = r.limits.as_ref().and_then(|l| l.get(k)) {
                let (rq, lq) = (
                    crate::quantity::parse(&req.0),
                    crate::quantity::parse(&lim.0),
                );
                if let (Ok(rq), Ok(lq)) = (rq, lq) {
                    if rq > lq {
                        return err(format!("{p}.resources.requests"), format!("Invalid value: {:?}: must be less than or equal to {k} limit of {}", req.0, lim.0));
                    }
                }
            }
        }
    }
    Ok(())
}

/// Exactly one handler, as `validateHandler` wants it.
/// `validateSeccompProfileField`. Where Kubernetes prints the whole profile struct (with a
/// pointer address) as the invalid value of `localhostProfile`, this prints the field.
/// An empty `localhostProfile` passes the API server but fails at kubelet's container
/// creation ("localhostProfile must be set…"); podinit says so before anything starts.
fn seccomp_profile(sp: &SeccompProfile, p: &str) -> R {
    let lp = sp.localhost_profile.as_deref();
    match sp.type_.as_str() {
        "" => return err(format!("{p}.type"), "Required value: type is required when seccompProfile is set"),
        "Localhost" => {
            let field = format!("{p}.localhostProfile");
            let Some(path) = lp.filter(|s| !s.is_empty()) else {
                return err(field, "Required value: must be set when seccomp type is Localhost");
            };
            if path.starts_with('/') {
                return err(field, format!("Invalid value: {path:?}: must be a relative path"));
            }
            if path.split('/').any(|c| c == "..") {
                return err(field, format!("Invalid value: {path:?}: must not contain '..'"));
            }
        }
        "RuntimeDefault" | "Unconfined" => {
            if let Some(path) = lp {
                return err(
                    format!("{p}.localhostProfile"),
                    format!("Invalid value: {path:?}: can only be set when seccomp type is Localhost"),
                );
            }
        }
        t => {
            return err(
                format!("{p}.type"),
                format!("Unsupported value: {t:?}: supported values: \"Localhost\", \"RuntimeDefault\", \"Unconfined\""),
            )
        }
    }
    Ok(())
}

fn one_handler(p: &str, set: &[(&str, bool)]) -> R {
    let mut on = set.iter().filter(|(_, on)| *on);
    match (on.next(), on.next()) {
        (None, _) => err(p.to_string(), "Required value: must specify a handler type"),
        (Some(_), Some((f, _))) => err(
            format!("{p}.{f}"),
            "Forbidden: may not specify more than 1 handler type",
        ),
        _ => Ok(()),
    }
}

fn port_value(v: &IntOrString, p: &str) -> R {
    match v {
        IntOrString::Int(n) if !(1..=65535).contains(n) => err(
            p.to_string(),
            format!("Invalid value: {n}: must be between 1 and 65535, inclusive"),
        ),
        IntOrString::String(s) if !is_port_name(s) => err(
            p.to_string(),
            format!("Invalid value: {s:?}: must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-), at most 15 characters, and at least one letter"),
        ),
        _ => Ok(()),
    }
}

/// IANA_SVC_NAME: 1–15 of [a-z0-9-], a letter among them, no leading, trailing or double
/// hyphen.
fn is_port_name(s: &str) -> bool {
    (1..=15).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && s.bytes().any(|b| b.is_ascii_lowercase())
        && !s.starts_with('-')
        && !s.ends_with('-')
        && !s.contains("--")
}

fn http_get(h: &HTTPGetAction, p: &str) -> R {
    port_value(&h.port, &format!("{p}.port"))?;
    match h.scheme.as_deref() {
        None | Some("HTTP") | Some("HTTPS") => {}
        Some(s) => {
            return err(
                format!("{p}.scheme"),
                format!("Unsupported value: {s:?}: supported values: \"HTTP\", \"HTTPS\""),
            )
        }
    }
    for (i, hd) in h.http_headers.iter().flatten().enumerate() {
        let ok = !hd.name.is_empty()
            && hd
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        if !ok {
            return err(
                format!("{p}.httpHeaders[{i}].name"),
                format!("Invalid value: {:?}: a valid HTTP header must consist of alphanumeric characters or '-'", hd.name),
            );
        }
    }
    Ok(())
}

fn exec_command(e: &ExecAction, p: &str) -> R {
    if e.command.as_ref().is_none_or(|c| c.is_empty()) {
        return err(format!("{p}.command"), "Required value");
    }
    Ok(())
}

fn probe_handler(pr: &Probe, p: &str) -> R {
    one_handler(
        p,
        &[
            ("exec", pr.exec.is_some()),
            ("httpGet", pr.http_get.is_some()),
            ("tcpSocket", pr.tcp_socket.is_some()),
            ("grpc", pr.grpc.is_some()),
        ],
    )?;
    for (f, v) in [
        ("initialDelaySeconds", pr.initial_delay_seconds),
        ("timeoutSeconds", pr.timeout_seconds),
        ("periodSeconds", pr.period_seconds),
        ("successThreshold", pr.success_threshold),
        ("failureThreshold", pr.failure_threshold),
    ] {
        if let Some(v) = v.filter(|v| *v < 0) {
            return err(
                format!("{p}.{f}"),
                format!("Invalid value: {v}: must be greater than or equal to 0"),
            );
        }
    }
    if let Some(g) = pr.termination_grace_period_seconds.filter(|g| *g <= 0) {
        return err(
            format!("{p}.terminationGracePeriodSeconds"),
            format!("Invalid value: {g}: must be greater than 0"),
        );
    }
    if let Some(e) = &pr.exec {
        exec_command(e, &format!("{p}.exec"))?;
    }
    if let Some(h) = &pr.http_get {
        http_get(h, &format!("{p}.httpGet"))?;
    }
    if let Some(t) = &pr.tcp_socket {
        port_value(&t.port, &format!("{p}.tcpSocket.port"))?;
    }
    if let Some(g) = &pr.grpc {
        port_value(&IntOrString::Int(g.port), &format!("{p}.grpc.port"))?;
    }
    Ok(())
}

fn hook_handler(h: &LifecycleHandler, p: &str) -> R {
    one_handler(
        p,
        &[
            ("exec", h.exec.is_some()),
            ("httpGet", h.http_get.is_some()),
            ("tcpSocket", h.tcp_socket.is_some()),
            ("sleep", h.sleep.is_some()),
        ],
    )?;
    if let Some(e) = &h.exec {
        exec_command(e, &format!("{p}.exec"))?;
    }
    if let Some(g) = &h.http_get {
        http_get(g, &format!("{p}.httpGet"))?;
    }
    if let Some(t) = &h.tcp_socket {
        port_value(&t.port, &format!("{p}.tcpSocket.port"))?;
    }
    if let Some(s) = h.sleep.as_ref().filter(|s| s.seconds < 0) {
        return err(
            format!("{p}.sleep.seconds"),
            format!("Invalid value: {}: must be non-negative", s.seconds),
        );
    }
    Ok(())
}

/// The downward-API fields an env var may use (`validEnvDownwardAPIFieldPathExpressions`).
const ENV_FIELD_PATHS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
];

fn value_from(src: &k8s_openapi::api::core::v1::EnvVarSource, has_value: bool, p: &str) -> R {
    let n = [
        src.field_ref.is_some(),
        src.resource_field_ref.is_some(),
        src.config_map_key_ref.is_some(),
        src.secret_key_ref.is_some(),
        src.file_key_ref.is_some(),
    ]
    .iter()
    .filter(|b| **b)
    .count();
    if n == 0 {
        return err(p.to_string(), "Invalid value: \"\": must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`");
    }
    if n > 1 {
        return err(
            p.to_string(),
            "Invalid value: \"\": may not have more than one field specified at a time",
        );
    }
    if has_value {
        return err(
            p.to_string(),
            "Invalid value: \"\": may not be specified when `value` is not empty",
        );
    }
    if src.file_key_ref.is_some() {
        return err(format!("{p}.fileKeyRef"), "not supported");
    }
    if let Some(f) = &src.field_ref {
        let path = f.field_path.as_str();
        let keyed = |prefix: &str| {
            path.strip_prefix(prefix)
                .and_then(|r| r.strip_suffix("']"))
                .is_some_and(|k| !k.is_empty())
        };
        if !(ENV_FIELD_PATHS.contains(&path)
            || keyed("metadata.labels['")
            || keyed("metadata.annotations['"))
        {
            return err(
                format!("{p}.fieldRef.fieldPath"),
                format!("Unsupported value: {path:?}: supported values: \"metadata.annotations\", \"metadata.labels\", \"metadata.name\", \"metadata.namespace\", \"metadata.uid\", \"spec.nodeName\", \"spec.serviceAccountName\", \"status.hostIP\", \"status.hostIPs\", \"status.podIP\", \"status.podIPs\""),
            );
        }
    }
    if let Some(r) = &src.resource_field_ref {
        let ok = [
            "limits.cpu",
            "limits.memory",
            "limits.ephemeral-storage",
            "requests.cpu",
            "requests.memory",
            "requests.ephemeral-storage",
        ]
        .contains(&r.resource.as_str())
            || r.resource.starts_with("limits.hugepages-")
            || r.resource.starts_with("requests.hugepages-");
        if !ok {
            return err(
                format!("{p}.resourceFieldRef.resource"),
                format!("Unsupported value: {:?}", r.resource),
            );
        }
    }
    for (f, key) in [
        (
            "configMapKeyRef",
            src.config_map_key_ref.as_ref().map(|r| (&r.name, &r.key)),
        ),
        (
            "secretKeyRef",
            src.secret_key_ref.as_ref().map(|r| (&r.name, &r.key)),
        ),
    ] {
        if let Some((name, key)) = key {
            if name.is_empty() {
                return err(format!("{p}.{f}.name"), "Required value");
            }
            if key.is_empty() {
                return err(format!("{p}.{f}.key"), "Required value");
            }
        }
    }
    Ok(())
}

/// `dnsPolicy`, `dnsConfig`, `hostAliases` and `subdomain` (`validateDNSPolicy`,
/// `validatePodDNSConfig`, `ValidateHostAliases`).
fn dns(spec: &k8s_openapi::api::core::v1::PodSpec) -> R {
    let policy = spec.dns_policy.as_deref().unwrap_or("ClusterFirst");
    if !["ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"].contains(&policy) {
        return err(
            "spec.dnsPolicy",
            format!("Unsupported value: {policy:?}: supported values: \"ClusterFirst\", \"ClusterFirstWithHostNet\", \"Default\", \"None\""),
        );
    }
    let cfg = spec.dns_config.as_ref();
    if policy == "None" {
        let Some(c) = cfg else {
            return err(
                "spec.dnsConfig",
                "Required value: must provide `dnsConfig` when `dnsPolicy` is None",
            );
        };
        if c.nameservers.as_ref().is_none_or(|n| n.is_empty()) {
            return err(
                "spec.dnsConfig.nameservers",
                "Required value: must provide at least one DNS nameserver when `dnsPolicy` is None",
            );
        }
    }
    if let Some(c) = cfg {
        let ns = c.nameservers.as_deref().unwrap_or_default();
        if ns.len() > 3 {
            return err(
                "spec.dnsConfig.nameservers",
                format!("Invalid value: {ns:?}: must not have more than 3 nameservers"),
            );
        }
        for (i, n) in ns.iter().enumerate() {
            if n.parse::<std::net::IpAddr>().is_err() {
                return err(
                    format!("spec.dnsConfig.nameservers[{i}]"),
                    format!("Invalid value: {n:?}: must be a valid IP address"),
                );
            }
        }
        if c.searches.as_ref().is_some_and(|s| s.len() > 32) {
            return err(
                "spec.dnsConfig.searches",
                "Invalid value: must not have more than 32 search paths",
            );
        }
    }
    for (i, a) in spec.host_aliases.iter().flatten().enumerate() {
        if a.ip.parse::<std::net::IpAddr>().is_err() {
            return err(
                format!("spec.hostAliases[{i}].ip"),
                format!("Invalid value: {:?}: must be valid IP address", a.ip),
            );
        }
        for (j, h) in a.hostnames.iter().flatten().enumerate() {
            dns1123_subdomain(format!("spec.hostAliases[{i}].hostnames[{j}]"), h)?;
        }
    }
    if let Some(sub) = spec.subdomain.as_deref().filter(|s| !s.is_empty()) {
        dns1123_label("spec.subdomain", sub)?;
    }
    Ok(())
}
