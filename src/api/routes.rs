//! Which route a request names (docs/interface.md §3), with its parameters validated. Pure.

use super::http::Request;
use super::Error;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    Pod {
        watch: bool,
    },
    Events {
        watch: bool,
    },
    Log {
        container: String,
        follow: bool,
        previous: bool,
        tail_lines: Option<usize>,
        timestamps: bool,
    },
    Exec {
        container: String,
    },
    /// `podinit attach`: the container's output, and with `stdin` its input.
    Attach {
        container: String,
        stdin: bool,
    },
    /// A new window size for the container's terminal.
    Resize {
        container: String,
    },
    EphemeralContainers,
    /// `PATCH /v1/pod/resize`: the `resize` subresource.
    PodResize,
    Condition {
        type_: String,
    },
    Terminate,
    Healthz,
    Metrics,
}

fn flag(req: &Request, key: &str) -> Result<bool, Error> {
    match req.param(key) {
        None | Some("false") | Some("0") => Ok(false),
        Some("true") | Some("1") | Some("") => Ok(true),
        Some(v) => Err(Error::BadRequest(format!(
            "query parameter {key}: invalid boolean {v:?}"
        ))),
    }
}

/// Container names and condition types are Kubernetes names; anything else (a `/`, `..`)
/// cannot name one, so it is refused before any lookup.
fn checked_name(s: &str, what: &str) -> Result<String, Error> {
    let ok = !s.is_empty()
        && s.len() <= 253
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'/'))
        && !s.split('/').any(|c| c.is_empty() || c == "." || c == "..");
    if ok {
        Ok(s.to_string())
    } else {
        Err(Error::BadRequest(format!("invalid {what} {s:?}")))
    }
}

pub fn route(req: &Request) -> Result<Route, Error> {
    let segs: Vec<&str> = req.path.trim_end_matches('/').split('/').collect();
    let m = req.method.as_str();
    let (want, r): (&[&str], Route) = match segs.as_slice() {
        ["", "healthz"] => (&["GET", "HEAD"], Route::Healthz),
        ["", "metrics"] => (&["GET"], Route::Metrics),
        ["", "v1", "pod"] => (
            &["GET"],
            Route::Pod {
                watch: flag(req, "watch")?,
            },
        ),
        ["", "v1", "events"] => (
            &["GET"],
            Route::Events {
                watch: flag(req, "watch")?,
            },
        ),
        ["", "v1", "pod", "terminate"] => (&["POST"], Route::Terminate),
        ["", "v1", "pod", "resize"] => (&["PATCH"], Route::PodResize),
        // Condition types may hold a '/' (`example.com/gate`), escaped or not.
        ["", "v1", "pod", "conditions", t @ ..] if !t.is_empty() => (
            &["PUT"],
            Route::Condition {
                type_: checked_name(&t.join("/"), "condition type")?,
            },
        ),
        ["", "v1", "ephemeralcontainers"] => (&["POST"], Route::EphemeralContainers),
        ["", "v1", "containers", name, "log"] => {
            let tail_lines = match req.param("tailLines") {
                None => None,
                Some(v) => Some(v.parse::<usize>().map_err(|_| {
                    Error::BadRequest(format!(
                        "query parameter tailLines: {v:?} is not a non-negative integer"
                    ))
                })?),
            };
            (
                &["GET"],
                Route::Log {
                    container: checked_name(name, "container name")?,
                    follow: flag(req, "follow")?,
                    previous: flag(req, "previous")?,
                    tail_lines,
                    timestamps: flag(req, "timestamps")?,
                },
            )
        }
        ["", "v1", "containers", name, "attach"] => (
            &["POST"],
            Route::Attach {
                container: checked_name(name, "container name")?,
                stdin: flag(req, "stdin")?,
            },
        ),
        ["", "v1", "containers", name, "resize"] => (
            &["POST"],
            Route::Resize {
                container: checked_name(name, "container name")?,
            },
        ),
        ["", "v1", "containers", name, "exec"] => (
            &["POST"],
            Route::Exec {
                container: checked_name(name, "container name")?,
            },
        ),
        _ => {
            return Err(Error::NotFound(format!(
                "the server could not find the requested resource {}",
                req.path
            )))
        }
    };
    if !want.contains(&m) {
        return Err(Error::MethodNotAllowed(format!(
            "{m} is not allowed on {} (allowed: {})",
            req.path,
            want.join(", ")
        )));
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(method: &str, target: &str) -> Request {
        let raw = format!("{method} {target} HTTP/1.1\r\n\r\n");
        super::super::http::parse(raw.as_bytes())
            .unwrap()
            .unwrap()
            .0
    }

    #[test]
    fn every_route() {
        assert_eq!(
            route(&req("GET", "/v1/pod")),
            Ok(Route::Pod { watch: false })
        );
        assert_eq!(
            route(&req("GET", "/v1/pod?watch=true")),
            Ok(Route::Pod { watch: true })
        );
        assert_eq!(
            route(&req("GET", "/v1/events?watch=1")),
            Ok(Route::Events { watch: true })
        );
        assert_eq!(route(&req("GET", "/healthz")), Ok(Route::Healthz));
        assert_eq!(route(&req("GET", "/metrics")), Ok(Route::Metrics));
        assert_eq!(
            route(&req("POST", "/v1/pod/terminate")),
            Ok(Route::Terminate)
        );
        assert_eq!(
            route(&req("PUT", "/v1/pod/conditions/example.com%2Fgate")),
            Ok(Route::Condition {
                type_: "example.com/gate".into()
            })
        );
        assert_eq!(
            route(&req(
                "GET",
                "/v1/containers/web/log?follow=true&tailLines=5&timestamps=true"
            )),
            Ok(Route::Log {
                container: "web".into(),
                follow: true,
                previous: false,
                tail_lines: Some(5),
                timestamps: true
            })
        );
        assert_eq!(
            route(&req("POST", "/v1/containers/web/exec")),
            Ok(Route::Exec {
                container: "web".into()
            })
        );
        assert_eq!(
            route(&req("POST", "/v1/containers/web/attach?stdin=true")),
            Ok(Route::Attach {
                container: "web".into(),
                stdin: true
            })
        );
        assert_eq!(
            route(&req("POST", "/v1/containers/web/resize")),
            Ok(Route::Resize {
                container: "web".into()
            })
        );
        assert_eq!(
            route(&req("POST", "/v1/ephemeralcontainers")),
            Ok(Route::EphemeralContainers)
        );
    }

    #[test]
    fn refusals() {
        assert_eq!(route(&req("GET", "/v1/nope")).unwrap_err().status().0, 404);
        assert_eq!(
            route(&req("DELETE", "/v1/pod")).unwrap_err().status().0,
            405
        );
        assert_eq!(
            route(&req("GET", "/v1/pod/terminate"))
                .unwrap_err()
                .status()
                .0,
            405
        );
        let e = route(&req("GET", "/v1/containers/%2E%2E/log")).unwrap_err();
        assert_eq!(e.status(), (400, "BadRequest"));
        let e = route(&req("GET", "/v1/containers/web/log?tailLines=-1")).unwrap_err();
        assert_eq!(e.status().0, 400);
        let e = route(&req("GET", "/v1/pod?watch=maybe")).unwrap_err();
        assert!(e.message().contains("watch"));
    }
}
