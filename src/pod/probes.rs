//! Probe bookkeeping (kubelet's prober `worker`): when each probe of each container
//! instance runs, how results count against the thresholds, and what a result that takes
//! effect does to the pod. Pure: the supervisor runs the handlers and reports results.
//!
//! Rules (docs/semantics.md §Probes): initial results per container instance are readiness
//! Failure, liveness Success, startup Unknown; the first probe runs `initialDelaySeconds`
//! after `startedAt`, then every `periodSeconds`; a result takes effect after
//! `failureThreshold` / `successThreshold` equal results in a row; only the startup probe
//! runs until the container is Started, and never after; liveness and startup stop when
//! the pod terminates, readiness goes on; a liveness or startup failure kills the
//! container (the restart policy then applies) and holds the probe until the next
//! instance.

use super::plan::PodPlan;
use super::reason::{EventReason, EventType};
use super::state::{Phase, PodState};
use super::step::EventSpec;
use super::Millis;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ProbeKind {
    Startup,
    Liveness,
    Readiness,
}

impl ProbeKind {
    /// As kubelet names it in events ("Liveness probe failed: …").
    pub fn title(self) -> &'static str {
        match self {
            ProbeKind::Startup => "Startup",
            ProbeKind::Liveness => "Liveness",
            ProbeKind::Readiness => "Readiness",
        }
    }
    /// As in "failed liveness probe" and metric labels.
    pub fn lower(self) -> &'static str {
        match self {
            ProbeKind::Startup => "startup",
            ProbeKind::Liveness => "liveness",
            ProbeKind::Readiness => "readiness",
        }
    }
}

/// What one run of a probe came to, told apart as kubelet's prober does: a handler that
/// could not run at all (an exec that did not start) counts as a failure, but its event
/// says it errored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Success,
    Failure,
    Errored,
}

impl Verdict {
    /// From a handler's outcome: whether it passed, and whether it could not run.
    pub fn of(ok: bool, errored: bool) -> Verdict {
        match (ok, errored) {
            (true, _) => Verdict::Success,
            (false, false) => Verdict::Failure,
            (false, true) => Verdict::Errored,
        }
    }
}

/// A probe's numbers, defaulted (docs/semantics.md §Probes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    pub initial_delay_ms: Millis,
    pub period_ms: Millis,
    pub timeout_ms: Millis,
    pub success_threshold: u32,
    pub failure_threshold: u32,
    /// The probe-level `terminationGracePeriodSeconds` (liveness and startup), in ms.
    pub grace_ms: Option<Millis>,
}

impl Timing {
    pub fn from_probe(p: &k8s_openapi::api::core::v1::Probe) -> Timing {
        let secs = |v: Option<i32>, d: i32| v.unwrap_or(d).max(0) as Millis * 1000;
        Timing {
            initial_delay_ms: secs(p.initial_delay_seconds, 0),
            period_ms: secs(p.period_seconds, 10).max(1000),
            timeout_ms: secs(p.timeout_seconds, 1).max(1000),
            success_threshold: p.success_threshold.unwrap_or(1).max(1) as u32,
            failure_threshold: p.failure_threshold.unwrap_or(3).max(1) as u32,
            grace_ms: p
                .termination_grace_period_seconds
                .map(|s| s.max(0) as Millis * 1000),
        }
    }
}

/// One probe of one container.
#[derive(Clone, Debug)]
pub struct Worker {
    pub ctr: usize,
    pub kind: ProbeKind,
    pub timing: Timing,
    /// The container run this worker follows (its `restartCount`); results of an earlier
    /// run are dropped.
    instance: Option<u32>,
    next_at: Millis,
    in_flight: bool,
    /// The last raw result and how many times in a row it came.
    last: Option<bool>,
    run: u32,
    /// The result in effect (`None`: unknown).
    pub result: Option<bool>,
    /// Stopped until the next container instance (after a liveness/startup kill, or a
    /// startup success).
    on_hold: bool,
}

/// A probe to run now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Due {
    pub worker: usize,
    pub ctr: usize,
    pub kind: ProbeKind,
    /// The container run it is for (pass back to [`Probes::record`]).
    pub instance: u32,
    pub timeout_ms: Millis,
}

#[derive(Clone, Debug, Default)]
pub struct Probes {
    pub workers: Vec<Worker>,
}

impl Probes {
    /// One worker per probe in the spec; `probes[i]` lists container `i`'s (plan order).
    pub fn new(probes: &[Vec<(ProbeKind, Timing)>]) -> Probes {
        let mut p = Probes::default();
        for (ctr, list) in probes.iter().enumerate() {
            p.add(ctr, list);
        }
        p
    }

    /// Workers for container `ctr`'s probes, idle until it runs.
    pub fn add(&mut self, ctr: usize, probes: &[(ProbeKind, Timing)]) {
        for &(kind, timing) in probes {
            self.workers.push(Worker {
                ctr,
                kind,
                timing,
                instance: None,
                next_at: 0,
                in_flight: false,
                last: None,
                run: 0,
                result: None,
                on_hold: true,
            });
        }
    }

    pub fn is_empty(&self) -> bool {
        self.workers.is_empty()
    }

    /// Container `ctr` runs (its API state became Running at `started_at`, postStart
    /// done): its probes start over with their initial results.
    pub fn container_started(&mut self, ctr: usize, instance: u32, started_at: Millis) {
        for w in self.workers.iter_mut().filter(|w| w.ctr == ctr) {
            w.instance = Some(instance);
            w.next_at = started_at + w.timing.initial_delay_ms;
            w.in_flight = false;
            w.last = None;
            w.run = 0;
            w.result = match w.kind {
                ProbeKind::Readiness => Some(false),
                ProbeKind::Liveness => Some(true),
                ProbeKind::Startup => None,
            };
            w.on_hold = false;
        }
    }

    /// Probes to run now, marked in flight; and the next time one is due (to wake up).
    pub fn due(&mut self, st: &PodState, now: Millis) -> (Vec<Due>, Option<Millis>) {
        let mut out = Vec::new();
        let mut next: Option<Millis> = None;
        for (k, w) in self.workers.iter_mut().enumerate() {
            let Some(instance) = w.instance else { continue };
            let c = &st.containers[w.ctr];
            let current = c.phase == Phase::Running && c.restart_count == instance;
            if !current || w.on_hold || w.in_flight || !c.post_start_done {
                continue;
            }
            let stopping = st.terminating.is_some() || c.stopping.is_some();
            let runs_now = match w.kind {
                ProbeKind::Startup => !c.started && !stopping,
                ProbeKind::Liveness => c.started && !stopping,
                ProbeKind::Readiness => c.started,
            };
            if !runs_now {
                continue;
            }
            if w.next_at > now {
                next = Some(next.map_or(w.next_at, |n| n.min(w.next_at)));
                continue;
            }
            w.in_flight = true;
            out.push(Due {
                worker: k,
                ctr: w.ctr,
                kind: w.kind,
                instance,
                timeout_ms: w.timing.timeout_ms,
            });
        }
        (out, next)
    }

    /// The probe `due` returned has a result (`verdict`, with the handler's output or
    /// error) at `now`.
    /// Updates `st` when the result takes effect and returns the events to emit.
    pub fn record(
        &mut self,
        plan: &PodPlan,
        st: &mut PodState,
        due: Due,
        verdict: Verdict,
        output: &str,
        now: Millis,
    ) -> Vec<EventSpec> {
        let mut events = Vec::new();
        let w = &mut self.workers[due.worker];
        if w.instance != Some(due.instance) {
            return events;
        }
        w.in_flight = false;
        // The next probe a period after this one was due, never in the past.
        w.next_at = (w.next_at + w.timing.period_ms).max(now);
        let c = &st.containers[w.ctr];
        if c.phase != Phase::Running || c.restart_count != due.instance {
            return events;
        }
        let name = plan.containers[w.ctr].name.clone();
        let ok = verdict == Verdict::Success;
        let message = match verdict {
            Verdict::Success => None,
            Verdict::Failure => Some(format!("{} probe failed: {output}", w.kind.title())),
            // kubelet's words for a prober error, whose result is Unknown.
            Verdict::Errored => Some(format!(
                "{} probe errored and resulted in unknown state: {output}",
                w.kind.title()
            )),
        };
        if let Some(message) = message {
            events.push(EventSpec {
                type_: EventType::Warning,
                reason: EventReason::Unhealthy,
                message,
                container: Some(w.ctr),
            });
        }
        if w.last == Some(ok) {
            w.run = w.run.saturating_add(1);
        } else {
            w.last = Some(ok);
            w.run = 1;
        }
        let needed = if ok {
            w.timing.success_threshold
        } else {
            w.timing.failure_threshold
        };
        if w.run < needed {
            return events;
        }
        w.result = Some(ok);
        match (w.kind, ok) {
            (ProbeKind::Readiness, _) => st.on_probe_ready(plan, w.ctr, ok),
            (ProbeKind::Startup, true) => {
                // Started: the startup probe is done for this instance.
                w.on_hold = true;
                st.on_probe_started(plan, w.ctr, true);
            }
            (ProbeKind::Liveness, true) => {}
            (ProbeKind::Startup | ProbeKind::Liveness, false) => {
                w.on_hold = true;
                w.run = 0;
                let grace = w
                    .timing
                    .grace_ms
                    .unwrap_or(plan.grace_seconds.saturating_mul(1000));
                let kind = plan.containers[w.ctr].kind;
                // kubelet words a sidecar's kill apart, without the restart note.
                let message = if kind == super::plan::Kind::Sidecar {
                    format!("Init container {name} failed {} probe", w.kind.lower())
                } else {
                    let restarts = super::restart::restartable(plan, &plan.containers[w.ctr]);
                    format!(
                        "Container {name} failed {} probe{}",
                        w.kind.lower(),
                        if restarts { ", will be restarted" } else { "" }
                    )
                };
                events.push(EventSpec {
                    type_: EventType::Normal,
                    reason: EventReason::Killing,
                    message,
                    container: Some(w.ctr),
                });
                st.kill_container(plan, w.ctr, grace, now);
            }
        }
        events
    }
}
