//! Probes and lifecycle hooks: one handler each, and its fields (`validateHandler`,
//! `validateProbe`).

use k8s_openapi::api::core::v1::{ExecAction, HTTPGetAction, LifecycleHandler, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::{err, R};

/// Exactly one handler, as `validateHandler` wants it.
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

pub(super) fn probe_handler(pr: &Probe, p: &str) -> R {
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

pub(super) fn hook_handler(h: &LifecycleHandler, p: &str) -> R {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_names_are_iana_service_names() {
        for ok in ["http", "h2c", "web-80"] {
            assert!(is_port_name(ok), "{ok}");
        }
        for bad in [
            "",
            "80",
            "-http",
            "http-",
            "a--b",
            "HTTP",
            "abcdefghijklmnop",
        ] {
            assert!(!is_port_name(bad), "{bad}");
        }
        assert!(port_value(&IntOrString::Int(0), "p").is_err());
        assert!(port_value(&IntOrString::Int(65535), "p").is_ok());
    }

    #[test]
    fn a_handler_is_exactly_one() {
        let e = one_handler("p", &[("exec", false), ("httpGet", false)]).unwrap_err();
        assert_eq!(e.field, "p");
        let e = one_handler("p", &[("exec", true), ("httpGet", true)]).unwrap_err();
        assert_eq!(e.field, "p.httpGet");
        assert!(one_handler("p", &[("exec", false), ("httpGet", true)]).is_ok());
    }
}
