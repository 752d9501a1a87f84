//! The Pod status as the API shows it (`v1 PodStatus`), rendered from `pod`'s state.

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus, ContainerUser, LinuxContainerUser, PodCondition, PodIP, PodStatus,
    VolumeMountStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::pod::state::{Condition, Terminated};
use crate::pod::{self, Kind, Millis, PodPlan, PodState, State};

/// Turns the pod's monotonic milliseconds into wall-clock times.
#[derive(Clone, Copy, Debug)]
pub struct WallClock {
    /// Wall time (Unix ms) at monotonic millisecond 0.
    pub epoch_unix_ms: i64,
}

impl WallClock {
    pub fn at(&self, m: Millis) -> Time {
        let ms = self.epoch_unix_ms.saturating_add(m as i64);
        Time(
            k8s_openapi::jiff::Timestamp::from_millisecond(ms)
                .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
        )
    }
}

/// What the status shows of a container beyond its state.
#[derive(Clone, Debug, Default)]
pub struct ContainerMeta {
    pub image: String,
    /// The bundle's absolute path.
    pub image_id: String,
    /// `podinit://<64 hex>` of the current or last run.
    pub container_id: Option<String>,
    /// The last run's uid, gid and additional groups, as its OCI spec has them.
    pub user: Option<(u32, u32, Vec<u32>)>,
    /// The container's `volumeMounts`: shown once it has been created.
    pub mounts: Vec<k8s_openapi::api::core::v1::VolumeMount>,
    /// The kernel can make recursive read-only mounts: what `IfPossible` became.
    pub rro_supported: bool,
    /// The resources kubelet has allocated to it (the spec's, once a resize is admitted).
    pub resources: Option<k8s_openapi::api::core::v1::ResourceRequirements>,
    /// Its cgroup's CPU and memory values as last read back (`None`: never read, and the
    /// allocated values are shown).
    pub observed: Option<crate::pod::allocation::CgroupValues>,
}

/// `allocatedResources` (the allocated requests) and `resources` (the requests and limits
/// its cgroup has, `pod::allocation::actual`), as `convertToAPIContainerStatuses` reports
/// them for a container that has been created (KEP-1287).
fn resource_statuses(
    r: &k8s_openapi::api::core::v1::ResourceRequirements,
    observed: Option<&crate::pod::allocation::CgroupValues>,
) -> (
    Option<
        std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    >,
    k8s_openapi::api::core::v1::ResourceRequirements,
) {
    let cpu_mem = |m: &Option<
        std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    >| {
        let out: std::collections::BTreeMap<_, _> = m
            .iter()
            .flatten()
            .filter(|(k, _)| *k == "cpu" || *k == "memory")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        (!out.is_empty()).then_some(out)
    };
    let resources = match observed {
        Some(v) => crate::pod::allocation::actual(r, v),
        None => k8s_openapi::api::core::v1::ResourceRequirements {
            requests: cpu_mem(&r.requests),
            limits: cpu_mem(&r.limits),
            claims: None,
        },
    };
    (r.requests.clone().filter(|m| !m.is_empty()), resources)
}

/// `volumeMounts` of a container status as kubelet reports them
/// (`convertToAPIContainerStatuses`): name, path and read-only of each mount, and for a
/// read-only one whether it is recursively read-only as resolved (`IfPossible` becomes
/// `Enabled` or `Disabled`).
fn mount_statuses(
    mounts: &[k8s_openapi::api::core::v1::VolumeMount],
    rro_supported: bool,
) -> Vec<VolumeMountStatus> {
    mounts
        .iter()
        .map(|m| VolumeMountStatus {
            name: m.name.clone(),
            mount_path: m.mount_path.clone(),
            read_only: Some(m.read_only == Some(true)),
            recursive_read_only: crate::pod::recursive_read_only::status(m, rro_supported)
                .map(str::to_string),
            ..Default::default()
        })
        .collect()
}

/// `status.user.linux` as the CRI reports it: the process's groups with its primary gid
/// first (containerd's `ensureAdditionalGids`).
fn user(u: &(u32, u32, Vec<u32>)) -> ContainerUser {
    let (uid, gid, groups) = u;
    let mut all = vec![i64::from(*gid)];
    for g in groups.iter().map(|g| i64::from(*g)) {
        if !all.contains(&g) {
            all.push(g);
        }
    }
    ContainerUser {
        linux: Some(LinuxContainerUser {
            uid: i64::from(*uid),
            gid: i64::from(*gid),
            supplemental_groups: Some(all),
        }),
    }
}

pub fn pod_status(
    plan: &PodPlan,
    st: &PodState,
    meta: &[ContainerMeta],
    clock: &WallClock,
    pod_ips: &[String],
) -> PodStatus {
    let mut init = Vec::new();
    let mut apps = Vec::new();
    let mut ephemeral = Vec::new();
    for (i, p) in plan.containers.iter().enumerate() {
        let cs = container_status(&p.name, &st.containers[i], &meta[i], clock);
        match p.kind {
            Kind::App => apps.push(cs),
            Kind::Ephemeral => ephemeral.push(cs),
            Kind::Init | Kind::Sidecar => init.push(cs),
        }
    }
    // kubelet's conditions carry the generation it acted on (KEP-5067); readiness gates
    // are set by others and carry none.
    let mut conditions: Vec<PodCondition> = st
        .conditions
        .iter()
        .map(|c| PodCondition {
            observed_generation: Some(plan.generation),
            ..condition(c, clock)
        })
        .collect();
    for (t, g) in &st.gates {
        conditions.push(PodCondition {
            type_: t.clone(),
            status: bool_str(g.status),
            reason: g.reason.clone(),
            message: g.message.clone(),
            last_transition_time: Some(clock.at(g.last_transition)),
            ..Default::default()
        });
    }
    PodStatus {
        phase: Some(pod::phase(plan, st).as_str().into()),
        conditions: Some(conditions),
        start_time: st.start_time.map(|t| clock.at(t)),
        reason: st.reason.clone(),
        message: st.message.clone(),
        pod_ip: pod_ips.first().cloned(),
        pod_ips: (!pod_ips.is_empty())
            .then(|| pod_ips.iter().map(|ip| PodIP { ip: ip.clone() }).collect()),
        qos_class: Some(plan.qos_class.as_str().into()),
        observed_generation: Some(plan.generation),
        init_container_statuses: (!init.is_empty()).then_some(init),
        container_statuses: Some(apps),
        ephemeral_container_statuses: (!ephemeral.is_empty()).then_some(ephemeral),
        ..Default::default()
    }
}

fn bool_str(b: bool) -> String {
    if b { "True" } else { "False" }.into()
}

fn condition(c: &Condition, clock: &WallClock) -> PodCondition {
    PodCondition {
        type_: c.type_.clone(),
        status: bool_str(c.status),
        reason: c.reason.clone(),
        message: c.message.clone(),
        last_transition_time: Some(clock.at(c.last_transition)),
        ..Default::default()
    }
}

/// A terminated state as the API shows it; `id`, the run's container ID.
pub fn terminated(
    t: &Terminated,
    id: Option<&String>,
    clock: &WallClock,
) -> ContainerStateTerminated {
    ContainerStateTerminated {
        exit_code: t.exit_code,
        signal: t.signal,
        reason: Some(t.reason.as_str().into()),
        message: t.message.clone(),
        started_at: t.started_at.map(|s| clock.at(s)),
        finished_at: t.finished_at.map(|f| clock.at(f)),
        // A status that could not be located has no container to name.
        container_id: id.filter(|_| t.finished_at.is_some()).cloned(),
    }
}

fn container_status(
    name: &str,
    c: &pod::ContainerState,
    meta: &ContainerMeta,
    clock: &WallClock,
) -> ContainerStatus {
    let id = meta.container_id.as_ref();
    let state = match &c.state {
        State::Waiting { reason, message } => ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some(reason.as_str().into()),
                message: message.clone(),
            }),
            ..Default::default()
        },
        // Until postStart returns, the API does not show the container Running.
        State::Running { .. } if !c.post_start_done => ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some(pod::WaitingReason::ContainerCreating.as_str().into()),
                message: None,
            }),
            ..Default::default()
        },
        State::Running { started_at } => ContainerState {
            running: Some(ContainerStateRunning {
                started_at: Some(clock.at(*started_at)),
            }),
            ..Default::default()
        },
        State::Terminated(t) => ContainerState {
            terminated: Some(terminated(t, id, clock)),
            ..Default::default()
        },
    };
    let last_state = c.last_state.as_ref().map(|t| ContainerState {
        terminated: Some(terminated(t, None, clock)),
        ..Default::default()
    });
    let (allocated, resources) = match meta.resources.as_ref().filter(|_| id.is_some()) {
        Some(r) => {
            let (a, r) = resource_statuses(r, meta.observed.as_ref());
            (a, Some(r))
        }
        None => (None, None),
    };
    ContainerStatus {
        name: name.into(),
        image: meta.image.clone(),
        image_id: meta.image_id.clone(),
        container_id: id.cloned(),
        state: Some(state),
        last_state: Some(last_state.unwrap_or_default()),
        ready: c.ready,
        started: Some(c.started),
        restart_count: c.restart_count as i32,
        user: meta.user.as_ref().map(user),
        volume_mounts: (id.is_some() && !meta.mounts.is_empty())
            .then(|| mount_statuses(&meta.mounts, meta.rro_supported)),
        allocated_resources: allocated,
        resources,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod::{ContainerPlan, Exit, RestartPolicy};

    fn plan() -> PodPlan {
        let c = ContainerPlan::bare;
        PodPlan::bare(
            RestartPolicy::Never,
            vec![c("init", Kind::Init), c("web", Kind::App)],
        )
    }

    #[test]
    fn renders_kubernetes_shapes() {
        let plan = plan();
        let mut st = PodState::new(&plan);
        st.on_sandbox_ready(0);
        let meta = vec![
            ContainerMeta {
                image: "busybox".into(),
                image_id: "/b/busybox".into(),
                container_id: Some("podinit://aa".into()),
                user: Some((1000, 3000, vec![4000, 3000, 50000])),
                mounts: vec![
                    serde_json::from_value(serde_json::json!({"name": "data", "mountPath": "/data"}))
                        .unwrap(),
                    serde_json::from_value(
                        serde_json::json!({"name": "cfg", "mountPath": "/etc/cfg", "readOnly": true}),
                    )
                    .unwrap(),
                ],
                rro_supported: true,
                observed: None,
                resources: Some(
                    serde_json::from_value(serde_json::json!({"requests": {"cpu": "100m", "example.com/x": "1"}, "limits": {"cpu": "200m"}}))
                        .unwrap(),
                ),
            };
            2
        ];
        let clock = WallClock {
            epoch_unix_ms: 1_767_225_600_000,
        };
        let _ = pod::step(&plan, &mut st, 0);
        st.on_started(&plan, 0, 0);
        st.on_post_start_done(&plan, 0, 0);
        st.on_exited(
            &plan,
            0,
            Exit {
                exit_code: 0,
                signal: None,
                oom_killed: false,
                message: Some("done".into()),
            },
            1500,
        );
        let _ = pod::step(&plan, &mut st, 1500);
        let v = serde_json::to_value(pod_status(&plan, &st, &meta, &clock, &["10.1.0.2".into()]))
            .unwrap();
        assert_eq!(v["phase"], "Pending");
        assert_eq!(v["startTime"], "2026-01-01T00:00:00Z");
        assert_eq!(v["podIP"], "10.1.0.2");
        assert_eq!(v["podIPs"][0]["ip"], "10.1.0.2");
        assert_eq!(v["qosClass"], "BestEffort");
        let init = &v["initContainerStatuses"][0];
        assert_eq!(init["name"], "init");
        assert_eq!(init["ready"], true);
        let t = &init["state"]["terminated"];
        assert_eq!(t["exitCode"], 0);
        assert_eq!(t["reason"], "Completed");
        assert_eq!(t["message"], "done");
        assert_eq!(t["finishedAt"], "2026-01-01T00:00:01Z");
        assert_eq!(t["containerID"], "podinit://aa");
        assert_eq!(
            init["allocatedResources"],
            serde_json::json!({"cpu": "100m", "example.com/x": "1"})
        );
        assert_eq!(
            init["resources"],
            serde_json::json!({"requests": {"cpu": "100m"}, "limits": {"cpu": "200m"}})
        );
        assert_eq!(
            init["volumeMounts"],
            serde_json::json!([
                {"name": "data", "mountPath": "/data", "readOnly": false},
                {"name": "cfg", "mountPath": "/etc/cfg", "readOnly": true, "recursiveReadOnly": "Disabled"},
            ])
        );
        let web = &v["containerStatuses"][0];
        assert_eq!(web["state"]["waiting"]["reason"], "ContainerCreating");
        assert_eq!(web["restartCount"], 0);
        assert_eq!(web["imageID"], "/b/busybox");
        assert_eq!(
            web["user"]["linux"],
            serde_json::json!({"uid": 1000, "gid": 3000, "supplementalGroups": [3000, 4000, 50000]}),
            "the primary gid first, once"
        );
        let types: Vec<&str> = v["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["type"].as_str().unwrap())
            .collect();
        assert_eq!(
            types,
            vec![
                "PodReadyToStartContainers",
                "Initialized",
                "ContainersReady",
                "Ready"
            ]
        );
        assert_eq!(v["conditions"][1]["status"], "True");
        assert!(v["conditions"][0]["lastTransitionTime"].is_string());
    }

    #[test]
    fn the_generation_acted_on_is_observed_by_the_status_and_its_conditions() {
        let mut plan = plan();
        plan.generation = 3;
        plan.readiness_gates = vec!["example.com/gate".into()];
        let mut st = PodState::new(&plan);
        st.on_sandbox_ready(0);
        let _ = pod::step(&plan, &mut st, 0);
        st.set_gate("example.com/gate", true, None, None, 0);
        let meta = vec![ContainerMeta::default(); 2];
        let clock = WallClock { epoch_unix_ms: 0 };
        let v = serde_json::to_value(pod_status(&plan, &st, &meta, &clock, &[])).unwrap();
        assert_eq!(v["observedGeneration"], 3);
        for c in v["conditions"].as_array().unwrap() {
            if c["type"] == "example.com/gate" {
                assert!(c.get("observedGeneration").is_none(), "{c}");
            } else {
                assert_eq!(c["observedGeneration"], 3, "{c}");
            }
        }
    }
}
