//! The first stage of `podinit run`: the pod's admission (`crate::admission`, shared
//! with the ephemeral-container route), stamped with its creation time; then kubelet's
//! admit handlers (`pod::admit`) on the node (`node`), which bind the pod to it or reject it.

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::admission::{admit_manifest, Admission};
use crate::pod::admit::{Node, Rejection};
use crate::pod::EventType;
use crate::sandbox::statedir::StateDir;
use crate::status::events::EventLog;
use crate::status::writer::StatusWriter;

/// `podinit run`'s exit status for a pod that ended Failed (docs/interface.md §2).
const EXIT_FAILED: i32 = 1;

/// `podinit run`'s admission: the manifest of `opts`, with the creation time of now. Not
/// inlined, as each stage of `run` before the pod's wait: its frame is gone by then
/// (docs/architecture.md §2).
#[inline(never)]
pub(super) fn for_run(opts: &super::RunOptions) -> Result<Admission, super::Error> {
    let invalid = |message: String| super::Error::Manifest {
        path: opts.manifest.clone(),
        message,
    };
    let paths = opts.dir_paths();
    let mut adm = admit_manifest(
        &opts.manifest,
        paths.dirs(),
        opts.presets.as_deref(),
        opts.max_restart_backoff,
    )
    .map_err(|e| invalid(e.to_string()))?;
    // What a user without root cannot have: refused before anything is made.
    if crate::sys::rootless::rootless() {
        if let Some(why) = adm
            .pod
            .spec
            .as_ref()
            .and_then(crate::pod::rootless::refusal)
        {
            return Err(invalid(why));
        }
    }
    // Set by the API server when it takes the pod; a manifest's own value is replaced.
    let now_ms = (crate::util::now_unix_nanos() / 1_000_000) as i64;
    adm.pod.metadata.creation_timestamp = k8s_openapi::jiff::Timestamp::from_millisecond(now_ms)
        .ok()
        .map(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time);
    Ok(adm)
}

/// Bind the admitted pod to `node`: kubelet sets a static pod's `spec.nodeName` to its
/// node's name (`fieldRef: spec.nodeName` and the status read it), and the containers
/// see the node's allocatable.
pub(super) fn bind(adm: &mut Admission, node: &Node) {
    if let Some(spec) = adm.pod.spec.as_mut() {
        spec.node_name = Some(node.name.clone());
    }
    // The downward API's default for a container without a limit is this allocatable.
    let get = |r: &str| {
        node.allocatable
            .get(r)
            .map(|v| (*v).clamp(0, i64::MAX as i128) as i64)
    };
    if let (Some(cpu), Some(mem)) = (get("cpu"), get("memory")) {
        adm.node_allocatable = Some((cpu, mem));
    }
}

/// kubelet's `rejectPod`: a Warning event with the handler's reason and message, and the
/// pod Failed with that reason and "Pod was rejected: <message>", its QoS class and
/// start time. Nothing else is created; the state dir keeps `status.json` and
/// `events.jsonl`. Returns the exit status of a Failed pod.
pub(super) fn reject(mut pod: Pod, node: &Node, r: &Rejection, sd: StateDir) -> i32 {
    crate::log::error(&format!(
        "the pod was rejected: {}: {}",
        r.reason(),
        r.message()
    ));
    if let Some(spec) = pod.spec.as_mut() {
        spec.node_name.get_or_insert_with(|| node.name.clone());
    }
    let secs = (crate::util::now_unix_nanos() / 1_000_000_000) as i64;
    let now = Time(
        k8s_openapi::jiff::Timestamp::from_second(secs)
            .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
    );
    let qos = pod.spec.as_ref().map(crate::pod::plan::qos_class);
    let status = PodStatus {
        phase: Some("Failed".into()),
        reason: Some(r.reason()),
        message: Some(r.status_message()),
        qos_class: qos.map(|q| q.as_str().to_string()),
        start_time: Some(now.clone()),
        ..Default::default()
    };
    let m = &pod.metadata;
    let written = EventLog::open(
        Some(sd.events_file().as_path()),
        m.name.as_deref().unwrap_or_default(),
        m.namespace.as_deref().unwrap_or("default"),
        m.uid.as_deref().unwrap_or_default(),
    )
    .map(|mut log| {
        log.record_text(EventType::Warning, &r.reason(), &r.message(), None, now);
    })
    .and_then(|()| StatusWriter::new(sd.status_file()).update(&pod, &status).1);
    let kept = written.is_ok();
    if let Err(e) = written {
        crate::log::error(&format!("writing the rejected pod's status: {e}"));
    }
    if let Err(e) = sd.finish(kept, super::pid1_mode()) {
        crate::log::error(&format!("cleaning up the state dir: {e}"));
    }
    if kept {
        EXIT_FAILED
    } else {
        crate::supervisor::EXIT_SANDBOX
    }
}
