//! The sandbox task (`io.kubernetes.cri.container-type: sandbox`): made from its
//! config.json like any container, with every namespace, the cgroup, hostname, sysctls
//! and security settings it asks for, but running podinit's pause (`sys::pause`) in
//! place of the image's program. The shim's binary is bind-mounted read-only into the
//! sandbox's `/dev` (a tmpfs there, so nothing is written to the image's snapshot).

use serde_json::{json, Value};
use std::path::Path;

pub const CONTAINER_TYPE: &str = "io.kubernetes.cri.container-type";
pub const SANDBOX_ID: &str = "io.kubernetes.cri.sandbox-id";

/// Where the pause program appears inside the sandbox.
const PAUSE_PATH: &str = "/dev/.podinit-pause";

/// Annotations of a bundle's config.json.
pub fn annotations(bundle: &Path) -> Result<serde_json::Map<String, Value>, String> {
    let path = bundle.join("config.json");
    let text = std::fs::read(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let v: Value =
        serde_json::from_slice(&text).map_err(|e| format!("parsing {}: {e}", path.display()))?;
    Ok(v.get("annotations")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default())
}

/// Whether the bundle is a CRI sandbox.
pub fn is_sandbox(ann: &serde_json::Map<String, Value>) -> bool {
    ann.get(CONTAINER_TYPE).and_then(Value::as_str) == Some("sandbox")
}

/// The shim that serves a task: its sandbox's, so that one shim serves the whole pod.
pub fn grouping(id: &str, ann: &serde_json::Map<String, Value>) -> String {
    ann.get(SANDBOX_ID)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or(id)
        .to_string()
}

/// Rewrites the sandbox's config.json: its program becomes podinit's pause, from `exe`.
pub fn use_podinit_pause(bundle: &Path, exe: &Path) -> Result<(), String> {
    let path = bundle.join("config.json");
    let text = std::fs::read(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let mut v: Value =
        serde_json::from_slice(&text).map_err(|e| format!("parsing {}: {e}", path.display()))?;
    rewrite(&mut v, exe)?;
    let tmp = bundle.join(".config.json.podinit");
    std::fs::write(&tmp, v.to_string()).map_err(|e| format!("writing {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, &path).map_err(|e| format!("replacing {}: {e}", path.display()))
}

fn rewrite(v: &mut Value, exe: &Path) -> Result<(), String> {
    let process = v
        .get_mut("process")
        .and_then(Value::as_object_mut)
        .ok_or("the sandbox's config.json has no process")?;
    process.insert("args".into(), json!([PAUSE_PATH, "pause"]));
    process.insert("terminal".into(), false.into());
    let mounts = v
        .as_object_mut()
        .ok_or("the sandbox's config.json is not an object")?
        .entry("mounts")
        .or_insert_with(|| json!([]));
    let list = mounts
        .as_array_mut()
        .ok_or("config.json: mounts is not a list")?;
    if !list
        .iter()
        .any(|m| m.get("destination").and_then(Value::as_str) == Some("/dev"))
    {
        return Err("the sandbox's config.json mounts nothing on /dev".into());
    }
    list.push(json!({
        "destination": PAUSE_PATH,
        "type": "bind",
        "source": exe.to_string_lossy(),
        "options": ["bind", "ro", "nosuid", "nodev"]
    }));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sandbox_runs_podinit_pause_bound_into_its_dev() {
        let mut v = json!({
            "process": {"args": ["/pause"], "terminal": false},
            "mounts": [{"destination": "/dev", "type": "tmpfs", "source": "tmpfs"}],
            "annotations": {CONTAINER_TYPE: "sandbox", SANDBOX_ID: "abc"}
        });
        rewrite(&mut v, Path::new("/usr/bin/containerd-shim-podinit-v1")).unwrap();
        assert_eq!(v["process"]["args"], json!([PAUSE_PATH, "pause"]));
        let last = v["mounts"].as_array().unwrap().last().unwrap().clone();
        assert_eq!(last["destination"], PAUSE_PATH);
        assert_eq!(last["source"], "/usr/bin/containerd-shim-podinit-v1");
        let ann = v["annotations"].as_object().unwrap();
        assert!(is_sandbox(ann));
        assert_eq!(grouping("x", ann), "abc");
        assert_eq!(grouping("x", &serde_json::Map::new()), "x");
    }
}
