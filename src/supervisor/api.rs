//! The supervisor's answers to the status socket's routes (docs/interface.md §3).

use crate::api::http::Request;
use crate::api::routes::{self, Route};
use crate::api::server::{Reply, Stream};
use crate::api::Error as ApiError;
use crate::logs;
use crate::pod::log_run::log_run;

use super::Supervisor;

fn json(code: u16, v: &serde_json::Value) -> Reply {
    Reply::Full {
        code,
        content_type: "application/json",
        body: serde_json::to_vec(v).unwrap_or_default(),
    }
}

/// An error's answer: its Kubernetes `Status` (`api::Error` decides code and reason).
pub(super) fn error(e: ApiError) -> Reply {
    Reply::Full {
        code: e.status().0,
        content_type: "application/json",
        body: e.body(),
    }
}

pub(super) fn success(code: u16, message: &str) -> Reply {
    json(
        code,
        &serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                            "status": "Success", "message": message, "code": code}),
    )
}

impl Supervisor<'_> {
    pub(super) fn handle(&mut self, req: &Request) -> Reply {
        self.release_later();
        let route = match routes::route(req) {
            Ok(r) => r,
            Err(e) => return error(e),
        };
        match route {
            Route::Healthz => Reply::Full {
                code: 200,
                content_type: "text/plain",
                body: b"ok".to_vec(),
            },
            Route::Pod { watch: false } => Reply::Full {
                code: 200,
                content_type: "application/json",
                body: self.pod_line(),
            },
            Route::Pod { watch: true } => Reply::Watch {
                stream: Stream::Pod,
                content_type: "application/json",
                initial: vec![self.pod_line()],
            },
            Route::Events { watch } => {
                let items: Vec<serde_json::Value> = self
                    .events
                    .items()
                    .filter_map(|e| serde_json::to_value(e).ok())
                    .collect();
                if watch {
                    Reply::Watch {
                        stream: Stream::Events,
                        content_type: "application/json",
                        initial: items
                            .iter()
                            .map(|e| line(e.to_string().into_bytes()))
                            .collect(),
                    }
                } else {
                    json(200, &serde_json::json!({ "items": items }))
                }
            }
            Route::Log {
                container,
                follow,
                previous,
                tail_lines,
                timestamps,
            } => self.log(&container, follow, previous, tail_lines, timestamps),
            Route::Terminate => self.terminate(&req.body),
            Route::Condition { type_ } => self.condition(&type_, &req.body),
            Route::Metrics => Reply::Full {
                code: 200,
                content_type: "text/plain; version=0.0.4",
                body: self.metrics().into_bytes(),
            },
            Route::Exec { container } => self.exec_route(&container, &req.body),
            Route::EphemeralContainers => self.ephemeral_route(&req.body),
            Route::PodResize => self.pod_resize_route(req),
            Route::Attach { container, stdin } => self.attach_route(&container, stdin),
            Route::Resize { container } => self.resize_route(&container, &req.body),
        }
    }

    /// `POST /v1/containers/NAME/exec`: `{"command":[…],"timeoutSeconds":N}`; answered
    /// when the command exits with `{"exitCode","stdout","stderr"}`.
    fn exec_route(&mut self, name: &str, body: &[u8]) -> Reply {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields, rename_all = "camelCase")]
        struct ExecRequest {
            command: Vec<String>,
            #[serde(default)]
            timeout_seconds: u64,
        }
        let r: ExecRequest = match serde_json::from_slice(body) {
            Ok(r) => r,
            Err(e) => return error(ApiError::BadRequest(format!("exec request body: {e}"))),
        };
        if r.command.is_empty() {
            return error(ApiError::BadRequest(
                "exec request body: command: Required value".into(),
            ));
        }
        let Some(i) = self.index_of(name) else {
            return self.not_in_pod(name);
        };
        if self.containers[i].ctr.run.is_none()
            || self.st.containers[i].phase != crate::pod::state::Phase::Running
        {
            return error(ApiError::Conflict(format!(
                "container {name:?} is not running"
            )));
        }
        match self.api_exec(i, &r.command, r.timeout_seconds) {
            Ok(token) => Reply::Deferred(token),
            Err(e) => error(ApiError::exec(name, &e)),
        }
    }

    /// `POST /v1/ephemeralcontainers`: admit an EphemeralContainer and start it.
    fn ephemeral_route(&mut self, body: &[u8]) -> Reply {
        use k8s_openapi::api::core::v1::EphemeralContainer;
        // Through a Value and the manifest's typed reader: the failing field's path in
        // the error, and the Kubernetes types' deserializers instantiated once.
        let ec = serde_json::from_slice::<serde_json::Value>(body)
            .map_err(|e| e.to_string())
            .and_then(|v| {
                use crate::manifest::strict;
                strict::typed::<EphemeralContainer>(&v)
                    .and_then(|ec| strict::unknown_fields_of(&v, &ec).map(|()| ec))
                    .map_err(|e| format!("{}: {}", e.field, e.message))
            });
        let ec = match ec {
            Ok(ec) => ec,
            Err(e) => return error(ApiError::BadRequest(format!("ephemeral container: {e}"))),
        };
        if self.st.terminating.is_some() {
            return error(ApiError::Conflict("the pod is terminating".into()));
        }
        let spec = self.cfg.pod_spec();
        if spec
            .ephemeral_containers
            .iter()
            .flatten()
            .any(|c| c.name == ec.name)
        {
            return error(ApiError::AlreadyExists(format!(
                "ephemeral container {:?} already exists",
                ec.name
            )));
        }
        let index = spec.ephemeral_containers.as_ref().map_or(0, Vec::len);
        let (c, bundle) = match crate::admission::admit_ephemeral(&ec, spec, index, self.cfg.dirs())
        {
            Ok(admitted) => admitted,
            Err(e) => return error(ApiError::Invalid(e.to_string())),
        };
        let ctr = match super::containers::Ctr::new(
            crate::pod::Kind::Ephemeral,
            &c,
            bundle,
            self.sd.container_dir(&ec.name),
            &self.cfg.cgroups,
            &self.cfg.pod_cgroup,
        ) {
            Ok(mut ctr) => {
                ctr.target = ec
                    .target_container_name
                    .as_ref()
                    .and_then(|t| self.index_of(t));
                ctr
            }
            Err(e) => {
                return error(ApiError::Invalid(format!(
                    "spec.ephemeralContainers[{index}]: {e}"
                )))
            }
        };
        // The pod's spec keeps it defaulted, as the API server does; its record reads it
        // from there.
        let ec = crate::manifest::ephemeral::ephemeral(c, ec.target_container_name);
        let body = serde_json::to_value(&ec).unwrap_or_default();
        if let Some(spec) = &mut self.cfg.pod.spec {
            spec.ephemeral_containers
                .get_or_insert_with(Vec::new)
                .push(ec);
        }
        self.add(ctr);
        self.status.pod_changed();
        json(201, &body)
    }

    /// The index of container `name`, if the pod has it.
    pub(super) fn index_of(&self, name: &str) -> Option<usize> {
        self.containers.iter().position(|m| m.ctr.name == name)
    }

    fn log(
        &self,
        name: &str,
        follow: bool,
        previous: bool,
        tail: Option<usize>,
        timestamps: bool,
    ) -> Reply {
        let Some(i) = self.index_of(name) else {
            return self.not_in_pod(name);
        };
        let c = &self.containers[i].ctr;
        let run = match log_run(&self.st.containers[i], c.runs, previous) {
            Ok(run) => run,
            Err(why) => {
                return error(ApiError::BadRequest(
                    why.message(name, &self.pod_name()).to_string(),
                ))
            }
        };
        let path = logs::LogFile::path_for(&self.sd.logs(), name, run);
        let text = logs::render(&path, tail, timestamps);
        // Followed while output may still come; a stream opened after the end would never
        // be ended.
        if follow && !previous && !self.output_done(i) {
            Reply::Watch {
                stream: Stream::Log(name.to_string(), timestamps),
                content_type: "text/plain",
                initial: if text.is_empty() { vec![] } else { vec![text] },
            }
        } else {
            Reply::Full {
                code: 200,
                content_type: "text/plain",
                body: text,
            }
        }
    }

    fn terminate(&mut self, body: &[u8]) -> Reply {
        let grace = if body.iter().all(u8::is_ascii_whitespace) {
            None
        } else {
            match serde_json::from_slice::<serde_json::Value>(body) {
                Ok(v) => match &v["gracePeriodSeconds"] {
                    serde_json::Value::Null => None,
                    g => match g.as_u64() {
                        Some(n) => Some(n),
                        None => {
                            return error(ApiError::BadRequest(
                                "gracePeriodSeconds must be a non-negative integer".into(),
                            ))
                        }
                    },
                },
                Err(e) => return error(ApiError::BadRequest(format!("invalid JSON body: {e}"))),
            }
        };
        let now = self.now();
        self.delete(now, grace);
        success(202, "termination started")
    }

    fn condition(&mut self, type_: &str, body: &[u8]) -> Reply {
        if !self.cfg.plan.readiness_gates.iter().any(|g| g == type_) {
            return error(ApiError::Invalid(format!(
                "condition {type_:?} is not a readiness gate of this pod (spec.readinessGates)"
            )));
        }
        let v: serde_json::Value = match serde_json::from_slice(body) {
            Ok(v) => v,
            Err(e) => return error(ApiError::BadRequest(format!("invalid JSON body: {e}"))),
        };
        let status = match v["status"].as_str() {
            Some("True") => true,
            Some("False") => false,
            _ => {
                return error(ApiError::BadRequest(
                    "status must be \"True\" or \"False\"".into(),
                ))
            }
        };
        let text = |k: &str| v[k].as_str().map(str::to_string);
        let now = self.now();
        self.st
            .set_gate(type_, status, text("reason"), text("message"), now);
        success(200, "condition set")
    }

    fn metrics(&self) -> String {
        let restarts: Vec<(String, u32)> = self
            .containers
            .iter()
            .zip(&self.st.containers)
            .map(|(m, s)| (m.ctr.name.clone(), s.restart_count))
            .collect();
        self.metrics.render(&restarts, self.reaped)
    }

    /// The API server's answer for a container the pod does not have.
    pub(super) fn not_in_pod(&self, name: &str) -> Reply {
        let msg = format!("container {name} is not valid for pod {}", self.pod_name());
        error(ApiError::BadRequest(msg.to_string()))
    }

    fn pod_name(&self) -> String {
        self.cfg.pod.metadata.name.clone().unwrap_or_default()
    }
}

pub(super) fn line(mut v: Vec<u8>) -> Vec<u8> {
    v.push(b'\n');
    v
}
