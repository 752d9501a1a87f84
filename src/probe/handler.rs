//! What a probe or hook runs, resolved from the pod spec: named ports looked up in the
//! container's `ports`, the default host, the HTTP scheme and path. Pure.

use k8s_openapi::api::core::v1::{Container, LifecycleHandler, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Handler {
    /// A command run inside the container.
    Exec(Vec<String>),
    Http(HttpGet),
    Tcp {
        host: String,
        port: u16,
    },
    Grpc {
        host: String,
        port: u16,
        service: String,
    },
    /// `lifecycle.*.sleep`.
    Sleep {
        ms: u64,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpGet {
    pub https: bool,
    pub host: String,
    pub port: u16,
    /// Path and query, starting with '/'.
    pub path: String,
    pub headers: Vec<(String, String)>,
    /// `kube-probe` or `kube-lifecycle`: the default User-Agent's product.
    pub agent: &'static str,
}

/// Who runs a handler: `User-Agent` products and error wording differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Use {
    Probe,
    Hook,
}

/// Why a probe's or hook's handler cannot run, in kubelet's words for each: the probe
/// errors (or the hook fails) with it at every run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HandlerError {
    /// None of the handler fields a probe (or a hook) may have is set.
    NoHandler(Use),
    /// An `httpGet.scheme` other than `HTTP` and `HTTPS`.
    Scheme(String),
    /// A port number outside 1 to 65535.
    PortNumber(i32),
    /// A port name that container `container` does not declare in its `ports`.
    PortName { container: String, name: String },
}

impl std::fmt::Display for HandlerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HandlerError::NoHandler(Use::Probe) => f.write_str("probe has no handler"),
            HandlerError::NoHandler(Use::Hook) => f.write_str("lifecycle hook has no handler"),
            HandlerError::Scheme(s) => write!(f, "unsupported scheme: {s:?}"),
            HandlerError::PortNumber(n) => write!(f, "invalid port number: {n}"),
            HandlerError::PortName { container, name } => {
                write!(f, "couldn't find port: {name} in {container}")
            }
        }
    }
}

/// The Kubernetes minor version podinit follows (the `kube-probe/1.N` User-Agent).
pub const KUBE_VERSION: &str = "1.37";

impl Handler {
    pub fn from_probe(
        p: &Probe,
        c: &Container,
        default_host: &str,
    ) -> Result<Handler, HandlerError> {
        if let Some(e) = &p.exec {
            return Ok(Handler::Exec(e.command.clone().unwrap_or_default()));
        }
        if let Some(h) = &p.http_get {
            return http(
                Use::Probe,
                c,
                default_host,
                h.host.as_deref(),
                &h.port,
                h.path.as_deref(),
                h.scheme.as_deref(),
                h.http_headers.iter().flatten().map(|h| (&h.name, &h.value)),
            );
        }
        if let Some(t) = &p.tcp_socket {
            return Ok(Handler::Tcp {
                host: host(t.host.as_deref(), default_host),
                port: port(c, &t.port)?,
            });
        }
        if let Some(g) = &p.grpc {
            return Ok(Handler::Grpc {
                host: default_host.to_string(),
                port: port(c, &IntOrString::Int(g.port))?,
                service: g.service.clone().unwrap_or_default(),
            });
        }
        Err(HandlerError::NoHandler(Use::Probe))
    }

    pub fn from_hook(
        h: &LifecycleHandler,
        c: &Container,
        default_host: &str,
    ) -> Result<Handler, HandlerError> {
        if let Some(e) = &h.exec {
            return Ok(Handler::Exec(e.command.clone().unwrap_or_default()));
        }
        if let Some(g) = &h.http_get {
            return http(
                Use::Hook,
                c,
                default_host,
                g.host.as_deref(),
                &g.port,
                g.path.as_deref(),
                g.scheme.as_deref(),
                g.http_headers.iter().flatten().map(|h| (&h.name, &h.value)),
            );
        }
        if let Some(t) = &h.tcp_socket {
            // Deprecated and never run by kubelet: a hook of this kind does nothing.
            let _ = t;
            return Ok(Handler::Sleep { ms: 0 });
        }
        if let Some(s) = &h.sleep {
            return Ok(Handler::Sleep {
                ms: s.seconds.max(0) as u64 * 1000,
            });
        }
        Err(HandlerError::NoHandler(Use::Hook))
    }
}

fn host(h: Option<&str>, default_host: &str) -> String {
    match h {
        Some(h) if !h.is_empty() => h.to_string(),
        _ => default_host.to_string(),
    }
}

/// A port by number, or by name through the container's `ports`.
pub fn port(c: &Container, p: &IntOrString) -> Result<u16, HandlerError> {
    match p {
        IntOrString::Int(n) => u16::try_from(*n)
            .ok()
            .filter(|&n| n > 0)
            .ok_or(HandlerError::PortNumber(*n)),
        IntOrString::String(name) => {
            if let Ok(n) = name.parse::<i32>() {
                return port(c, &IntOrString::Int(n));
            }
            c.ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some(name.as_str()))
                .and_then(|p| u16::try_from(p.container_port).ok())
                .ok_or_else(|| HandlerError::PortName {
                    container: c.name.clone(),
                    name: name.clone(),
                })
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn http<'a>(
    use_: Use,
    c: &Container,
    default_host: &str,
    h: Option<&str>,
    p: &IntOrString,
    path: Option<&str>,
    scheme: Option<&str>,
    headers: impl Iterator<Item = (&'a String, &'a String)>,
) -> Result<Handler, HandlerError> {
    let https = match scheme.unwrap_or("HTTP") {
        "HTTP" => false,
        "HTTPS" => true,
        s => return Err(HandlerError::Scheme(s.to_string())),
    };
    let mut path = path.unwrap_or("/").to_string();
    if !path.starts_with('/') {
        path.insert(0, '/');
    }
    Ok(Handler::Http(HttpGet {
        https,
        host: host(h, default_host),
        port: port(c, p)?,
        path,
        headers: headers.map(|(k, v)| (k.clone(), v.clone())).collect(),
        agent: match use_ {
            Use::Probe => "kube-probe",
            Use::Hook => "kube-lifecycle",
        },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(yaml: &str) -> Container {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    #[test]
    fn named_ports_resolve_through_the_container() {
        let c = container("{name: web, ports: [{name: http, containerPort: 8080}]}");
        assert_eq!(port(&c, &IntOrString::String("http".into())), Ok(8080));
        assert_eq!(port(&c, &IntOrString::String("81".into())), Ok(81));
        let e = port(&c, &IntOrString::String("grpc".into())).unwrap_err();
        assert_eq!(e.to_string(), "couldn't find port: grpc in web");
        assert_eq!(
            port(&c, &IntOrString::Int(0)).unwrap_err().to_string(),
            "invalid port number: 0"
        );
        assert!(port(&c, &IntOrString::Int(70000)).is_err());
    }

    #[test]
    fn http_probe_defaults() {
        let c = container("{name: web, ports: [{name: http, containerPort: 8080}]}");
        let p: Probe = serde_yaml_ng::from_str(
            "{httpGet: {port: http, path: healthz, httpHeaders: [{name: X-A, value: b}]}}",
        )
        .unwrap();
        let h = Handler::from_probe(&p, &c, "127.0.0.1").unwrap();
        assert_eq!(
            h,
            Handler::Http(HttpGet {
                https: false,
                host: "127.0.0.1".into(),
                port: 8080,
                path: "/healthz".into(),
                headers: vec![("X-A".into(), "b".into())],
                agent: "kube-probe",
            })
        );
    }

    #[test]
    fn hooks() {
        let c = container("{name: web}");
        let h: LifecycleHandler = serde_yaml_ng::from_str("{sleep: {seconds: 3}}").unwrap();
        assert_eq!(
            Handler::from_hook(&h, &c, "127.0.0.1"),
            Ok(Handler::Sleep { ms: 3000 })
        );
        let h: LifecycleHandler =
            serde_yaml_ng::from_str("{httpGet: {port: 80, scheme: HTTPS, host: 10.0.0.1}}")
                .unwrap();
        let Ok(Handler::Http(g)) = Handler::from_hook(&h, &c, "127.0.0.1") else {
            panic!()
        };
        assert!(g.https);
        assert_eq!(
            (g.host.as_str(), g.path.as_str(), g.agent),
            ("10.0.0.1", "/", "kube-lifecycle")
        );
        let h: LifecycleHandler = serde_yaml_ng::from_str("{exec: {command: [a, b]}}").unwrap();
        assert_eq!(
            Handler::from_hook(&h, &c, ""),
            Ok(Handler::Exec(vec!["a".into(), "b".into()]))
        );
    }
}
