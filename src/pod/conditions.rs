//! Pod conditions (docs/semantics.md §Conditions), in their order: PodReadyToStartContainers,
//! Initialized, ContainersReady, Ready, then the readiness gates, and
//! AllContainersRestarting once the pod has restarted every container. A condition's
//! `lastTransitionTime` changes only when its status does.

use super::phase::phase;
use super::plan::{Kind, PodPlan};
use super::state::{Condition, Phase, PodPhase, PodState, State};
use super::Millis;

/// (status, reason, message) of each of the four pod conditions.
type Computed = (bool, Option<String>, Option<String>);

pub fn update(plan: &PodPlan, st: &mut PodState, now: Millis) {
    let mut fresh: Vec<(String, Computed)> = vec![
        (
            "PodReadyToStartContainers".into(),
            (st.sandbox_ready, None, None),
        ),
        ("Initialized".into(), initialized(plan, st)),
    ];
    let cr = containers_ready(plan, st);
    let ready = if cr.0 {
        gates_ready(plan, st)
    } else {
        cr.clone()
    };
    fresh.push(("ContainersReady".into(), cr));
    fresh.push(("Ready".into(), ready));
    for (type_, (status, reason, message)) in fresh {
        set(st, &type_, status, reason, message, now);
    }
    // A resize kubelet could not admit, and one allocated but not yet in the cgroups (with
    // reason Error while applying it fails); kubelet drops each once resolved.
    let pending = st
        .resize_pending
        .clone()
        .map(|(why, m)| (Some(why.as_str().to_string()), Some(m)));
    resize_condition(st, "PodResizePending", pending, now);
    let in_progress = st
        .resize_in_progress
        .then(|| match st.resize_error.clone() {
            Some(m) => (Some("Error".to_string()), Some(m)),
            None => (None, None),
        });
    resize_condition(st, "PodResizeInProgress", in_progress, now);
    // Shown from the first restart of every container on: True while it runs.
    use super::restart_all::{CONDITION, REASON};
    match st.restarting_all.clone() {
        Some(r) => set(
            st,
            CONDITION,
            true,
            Some(REASON.into()),
            Some(r.message),
            now,
        ),
        None if st.conditions.iter().any(|c| c.type_ == CONDITION) => {
            set(st, CONDITION, false, None, None, now)
        }
        None => {}
    }
}

fn resize_condition(
    st: &mut PodState,
    type_: &str,
    v: Option<(Option<String>, Option<String>)>,
    now: Millis,
) {
    match v {
        Some((reason, message)) => set(st, type_, true, reason, message, now),
        None => st.conditions.retain(|c| c.type_ != type_),
    }
}

fn set(
    st: &mut PodState,
    type_: &str,
    status: bool,
    reason: Option<String>,
    message: Option<String>,
    now: Millis,
) {
    match st.conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            if c.status != status {
                c.last_transition = now;
            }
            c.status = status;
            c.reason = reason;
            c.message = message;
        }
        None => st.conditions.push(Condition {
            type_: type_.into(),
            status,
            reason,
            message,
            last_transition: now,
        }),
    }
}

fn names(plan: &PodPlan, idx: &[usize]) -> String {
    let v: Vec<&str> = idx
        .iter()
        .map(|&i| plan.containers[i].name.as_str())
        .collect();
    format!("[{}]", v.join(" "))
}

fn initialized(plan: &PodPlan, st: &PodState) -> Computed {
    let has_init = plan
        .containers
        .iter()
        .any(|c| matches!(c.kind, Kind::Init | Kind::Sidecar));
    // kubelet marks a succeeded pod's init containers as done (only when it has some).
    if has_init && phase(plan, st) == PodPhase::Succeeded {
        return (true, Some("PodCompleted".into()), None);
    }
    if st.app_started || st.initialized_before {
        return (true, None, None);
    }
    let incomplete: Vec<usize> = (0..plan.containers.len())
        .filter(|&i| {
            let c = &st.containers[i];
            match plan.containers[i].kind {
                Kind::Init => {
                    !(c.phase == Phase::Exited
                        && matches!(&c.state, State::Terminated(t) if t.succeeded()))
                }
                Kind::Sidecar => !c.started,
                Kind::App | Kind::Ephemeral => false,
            }
        })
        .collect();
    if incomplete.is_empty() {
        (true, None, None)
    } else {
        (
            false,
            Some("ContainersNotInitialized".into()),
            Some(format!(
                "containers with incomplete status: {}",
                names(plan, &incomplete)
            )),
        )
    }
}

fn containers_ready(plan: &PodPlan, st: &PodState) -> Computed {
    match phase(plan, st) {
        PodPhase::Succeeded => return (false, Some("PodCompleted".into()), None),
        PodPhase::Failed if st.terminal.is_some() => {
            return (false, Some("PodFailed".into()), None)
        }
        _ => {}
    }
    let unready: Vec<usize> = (0..plan.containers.len())
        .filter(|&i| {
            matches!(plan.containers[i].kind, Kind::Sidecar | Kind::App) && !st.containers[i].ready
        })
        .collect();
    if unready.is_empty() {
        (true, None, None)
    } else {
        (
            false,
            Some("ContainersNotReady".into()),
            Some(format!(
                "containers with unready status: {}",
                names(plan, &unready)
            )),
        )
    }
}

fn gates_ready(plan: &PodPlan, st: &PodState) -> Computed {
    let mut msgs = Vec::new();
    for g in &plan.readiness_gates {
        match st.gates.get(g) {
            None => msgs.push(format!(
                "corresponding condition of pod readiness gate \"{g}\" does not exist."
            )),
            Some(c) if !c.status => msgs.push(format!(
                "the status of pod readiness gate \"{g}\" is not \"True\", but False"
            )),
            Some(_) => {}
        }
    }
    if msgs.is_empty() {
        (true, None, None)
    } else {
        (
            false,
            Some("ReadinessGatesNotReady".into()),
            Some(msgs.join(", ")),
        )
    }
}
