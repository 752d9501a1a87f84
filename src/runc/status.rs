//! A container's status, worked out as runc does from what is there (the init process,
//! the exec fifo, the freezer), and the OCI state document the `state` verb prints and
//! hooks read.

use serde::Serialize;
use std::collections::HashMap;
use std::path::Path;

use super::state::{self, Root, State};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Creating,
    Created,
    Running,
    Paused,
    Stopped,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Creating => "creating",
            Status::Created => "created",
            Status::Running => "running",
            Status::Paused => "paused",
            Status::Stopped => "stopped",
        }
    }
}

/// Whether process `pid` started at `start` still runs: not gone, not another process
/// under a reused pid, not a zombie.
pub fn alive(pid: i32, start: u64) -> bool {
    pid > 0 && crate::sys::proc::is_running(pid, start)
}

/// The status of a recorded container.
pub fn of(root: &Root, s: &State) -> Status {
    if let Some((pid, start)) = s.creator {
        return if alive(pid, start) {
            Status::Creating
        } else {
            Status::Stopped
        };
    }
    if !alive(s.init_process_pid, s.init_process_start) {
        return Status::Stopped;
    }
    // As runc: a frozen container is paused, even one not started yet.
    let frozen = crate::cgroup::recorded::open(&s.id, s.cgroups_path.as_deref(), &s.cgroup_paths)
        .map(|g| g.is_frozen())
        .unwrap_or(false);
    if frozen {
        Status::Paused
    } else if state::fifo_path(&root.dir(&s.id)).exists() {
        Status::Created
    } else {
        Status::Running
    }
}

/// runc's `state` document, its keys in runc's order.
#[derive(Serialize)]
pub struct OciState<'a> {
    #[serde(rename = "ociVersion")]
    pub oci_version: &'a str,
    pub id: &'a str,
    pub pid: i32,
    pub status: &'a str,
    pub bundle: &'a Path,
    pub rootfs: &'a Path,
    pub created: &'a str,
    #[serde(skip_serializing_if = "HashMap::is_empty")]
    pub annotations: &'a HashMap<String, String>,
    pub owner: &'a str,
}

/// The runtime-spec version this runtime speaks, in state documents and `--version`.
pub const OCI_VERSION: &str = "1.1.0";

impl<'a> OciState<'a> {
    pub fn new(s: &'a State, status: Status, owner: &'a str) -> OciState<'a> {
        OciState {
            oci_version: OCI_VERSION,
            id: &s.id,
            // As runc: a stopped container has no pid.
            pid: if status == Status::Stopped {
                0
            } else {
                s.init_process_pid
            },
            status: status.as_str(),
            bundle: &s.bundle,
            rootfs: &s.rootfs,
            created: &s.created,
            annotations: &s.annotations,
            owner,
        }
    }
}

/// The runtime-spec state a hook reads on its stdin, its keys in runc's order.
pub fn hook_json(s: &State, status: &str, pid: i32) -> String {
    #[derive(Serialize)]
    struct HookState<'a> {
        #[serde(rename = "ociVersion")]
        oci_version: &'a str,
        id: &'a str,
        status: &'a str,
        // Go's `omitempty`, as runc's specs.State: no pid for a process that is gone.
        #[serde(skip_serializing_if = "is_zero")]
        pid: i32,
        bundle: &'a Path,
        #[serde(skip_serializing_if = "HashMap::is_empty")]
        annotations: &'a HashMap<String, String>,
    }
    serde_json::to_string(&HookState {
        oci_version: OCI_VERSION,
        id: &s.id,
        status,
        pid,
        bundle: &s.bundle,
        annotations: &s.annotations,
    })
    .unwrap_or_default()
}

fn is_zero(pid: &i32) -> bool {
    *pid == 0
}

/// JSON as Go's encoder writes it: `<`, `>`, `&`, U+2028 and U+2029 escaped. They can only
/// be inside strings, where the escapes mean the same.
pub fn go_escape(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// `state ID`: the document, indented, without a final newline (as runc).
pub fn verb(root: &Root, id: &str) -> Result<(), super::Error> {
    let s = state::load(root, id)?;
    let doc = OciState::new(&s, of(root, &s), "");
    let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
    super::print(&go_escape(&text));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> State {
        State {
            id: "c1".into(),
            init_process_pid: 31625,
            init_process_start: 1,
            creator: None,
            created: "2026-11-25T15:11:50.402072914Z".into(),
            bundle: "/tmp/rr/b".into(),
            rootfs: "/tmp/rr/b/rootfs".into(),
            annotations: HashMap::from([("a".to_string(), "b".to_string())]),
            cgroups_path: None,
            cgroup_paths: vec![],
            systemd_unit: None,
            config: Default::default(),
        }
    }

    #[test]
    fn the_state_document_has_runc_shape() {
        let s = sample();
        let text = serde_json::to_string_pretty(&OciState::new(&s, Status::Created, "")).unwrap();
        assert_eq!(
            text,
            r#"{
  "ociVersion": "1.1.0",
  "id": "c1",
  "pid": 31625,
  "status": "created",
  "bundle": "/tmp/rr/b",
  "rootfs": "/tmp/rr/b/rootfs",
  "created": "2026-11-25T15:11:50.402072914Z",
  "annotations": {
    "a": "b"
  },
  "owner": ""
}"#
        );
        let mut s = sample();
        s.annotations.clear();
        let v = serde_json::to_value(OciState::new(&s, Status::Stopped, "root")).unwrap();
        assert_eq!(v["pid"], 0);
        assert_eq!(v["status"], "stopped");
        assert!(v.get("annotations").is_none());
    }

    #[test]
    fn html_characters_escaped_as_go_does() {
        assert_eq!(
            go_escape(r#"{"a":"<b>&"}"#),
            r#"{"a":"\u003cb\u003e\u0026"}"#
        );
        let v: serde_json::Value = serde_json::from_str(&go_escape(r#"{"a":"<&>"}"#)).unwrap();
        assert_eq!(v["a"], "<&>");
    }

    #[test]
    fn hooks_get_the_runtime_spec_state() {
        let text = hook_json(&sample(), "creating", 5);
        assert!(text.starts_with(r#"{"ociVersion":"1.1.0","id":"c1","status":"creating","pid":5,"#));
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["status"], "creating");
        assert_eq!(v["pid"], 5);
        assert_eq!(v["annotations"]["a"], "b");
    }

    #[test]
    fn a_create_in_progress_is_creating_and_a_crashed_one_stopped() {
        let root = Root(std::env::temp_dir().join(format!("runc-status-{}", std::process::id())));
        let me = std::process::id() as i32;
        let mut s = sample();
        s.init_process_pid = 0;
        s.creator = Some((me, crate::sys::proc::start_time(me).unwrap()));
        assert_eq!(of(&root, &s), Status::Creating);
        s.creator = Some((me, 0));
        assert_eq!(of(&root, &s), Status::Stopped);
        s.creator = None;
        assert_eq!(of(&root, &s), Status::Stopped);
    }

    #[test]
    fn a_process_is_alive_only_with_its_start_time() {
        let me = std::process::id() as i32;
        let start = crate::sys::proc::start_time(me).unwrap();
        assert!(alive(me, start));
        assert!(!alive(me, start + 1));
        assert!(!alive(0, 0));
    }
}
