//! `spec`: the config.json runc writes as a starting point (`runc spec`, `--rootless`).

use serde_json::{json, Value};

/// The template, as runc 1.1 writes it: a busybox-style `sh` on a read-only `rootfs`, in
/// new pid, network, ipc, uts and mount namespaces, every device denied. `rootless` makes
/// it runnable by the calling user as runc's `--rootless` does (see [`to_rootless`]).
pub fn template(rootless: bool) -> serde_json::Value {
    let mut spec = example();
    // runc's Example adds a cgroup namespace on a pure cgroup v2 host.
    if crate::sys::cgroup::unified() {
        if let Some(ns) = spec["linux"]["namespaces"].as_array_mut() {
            ns.push(json!({ "type": "cgroup" }));
        }
    }
    if rootless {
        let (uid, gid) = (
            nix::unistd::geteuid().as_raw(),
            nix::unistd::getegid().as_raw(),
        );
        to_rootless(&mut spec, uid, gid);
    }
    spec
}

/// The document as runc prints it: indented with tabs, a newline after it.
pub fn render(spec: &Value) -> String {
    let mut out = Vec::new();
    let fmt = serde_json::ser::PrettyFormatter::with_indent(b"\t");
    let mut ser = serde_json::Serializer::with_formatter(&mut out, fmt);
    serde::Serialize::serialize(spec, &mut ser).expect("a JSON value serializes");
    out.push(b'\n');
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

/// runc's `specconv.Example()`.
fn example() -> Value {
    let caps = json!(["CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"]);
    json!({
        "ociVersion": "1.0.2-dev",
        "process": {
            "terminal": true,
            "user": { "uid": 0, "gid": 0 },
            "args": ["sh"],
            "env": [
                "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "TERM=xterm",
            ],
            "cwd": "/",
            "capabilities": {
                "bounding": caps,
                "effective": caps,
                "permitted": caps,
                "ambient": caps,
            },
            "rlimits": [{ "type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024 }],
            "noNewPrivileges": true,
        },
        "root": { "path": "rootfs", "readonly": true },
        "hostname": "runc",
        "mounts": [
            { "destination": "/proc", "type": "proc", "source": "proc" },
            {
                "destination": "/dev", "type": "tmpfs", "source": "tmpfs",
                "options": ["nosuid", "strictatime", "mode=755", "size=65536k"],
            },
            {
                "destination": "/dev/pts", "type": "devpts", "source": "devpts",
                "options": [
                    "nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5",
                ],
            },
            {
                "destination": "/dev/shm", "type": "tmpfs", "source": "shm",
                "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"],
            },
            {
                "destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue",
                "options": ["nosuid", "noexec", "nodev"],
            },
            {
                "destination": "/sys", "type": "sysfs", "source": "sysfs",
                "options": ["nosuid", "noexec", "nodev", "ro"],
            },
            {
                "destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup",
                "options": ["nosuid", "noexec", "nodev", "relatime", "ro"],
            },
        ],
        "linux": {
            "resources": { "devices": [{ "allow": false, "access": "rwm" }] },
            "namespaces": [
                { "type": "pid" },
                { "type": "network" },
                { "type": "ipc" },
                { "type": "uts" },
                { "type": "mount" },
            ],
            "maskedPaths": [
                "/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys",
                "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats",
                "/proc/sched_debug", "/sys/firmware", "/proc/scsi",
            ],
            "readonlyPaths": [
                "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
            ],
        },
    })
}

/// runc's `specconv.ToRootless`: a user namespace mapping root to the caller (in place
/// of the network namespace, which an unprivileged user cannot set up), /sys bound from
/// the host (sysfs cannot be mounted there), no uid=/gid= mount options (ids not mapped),
/// no cgroup settings (the user may not own a cgroup).
fn to_rootless(spec: &mut Value, uid: u32, gid: u32) {
    let linux = &mut spec["linux"];
    if let Some(ns) = linux["namespaces"].as_array_mut() {
        ns.retain(|n| !matches!(n["type"].as_str(), Some("network" | "user")));
        ns.push(json!({ "type": "user" }));
    }
    linux["uidMappings"] = json!([{ "containerID": 0, "hostID": uid, "size": 1 }]);
    linux["gidMappings"] = json!([{ "containerID": 0, "hostID": gid, "size": 1 }]);
    if let Some(l) = linux.as_object_mut() {
        l.remove("resources");
    }
    for m in spec["mounts"].as_array_mut().into_iter().flatten() {
        if m["destination"].as_str().map(|d| d.trim_end_matches('/')) == Some("/sys") {
            *m = json!({
                "destination": "/sys", "type": "none", "source": "/sys",
                "options": ["rbind", "nosuid", "noexec", "nodev", "ro"],
            });
            continue;
        }
        if let Some(opts) = m.get_mut("options").and_then(Value::as_array_mut) {
            opts.retain(|o| {
                o.as_str()
                    .is_none_or(|o| !o.starts_with("uid=") && !o.starts_with("gid="))
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_template_is_a_valid_runtime_spec() {
        for rootless in [false, true] {
            let spec: oci_spec::runtime::Spec =
                serde_json::from_value(template(rootless)).expect("a valid spec");
            assert_eq!(
                spec.process().as_ref().unwrap().args().as_ref().unwrap(),
                &["sh"]
            );
        }
    }

    #[test]
    fn rootless_maps_the_caller_and_drops_what_needs_privilege() {
        let mut spec = example();
        to_rootless(&mut spec, 1000, 100);
        let linux = &spec["linux"];
        let ns: Vec<&str> = linux["namespaces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["type"].as_str().unwrap())
            .collect();
        assert_eq!(ns, ["pid", "ipc", "uts", "mount", "user"]);
        assert_eq!(
            linux["uidMappings"],
            json!([{ "containerID": 0, "hostID": 1000, "size": 1 }])
        );
        assert_eq!(linux["gidMappings"][0]["hostID"], 100);
        assert!(linux.get("resources").is_none());
        assert_eq!(spec["mounts"][5]["source"], "/sys");
        assert_eq!(spec["mounts"][5]["options"][0], "rbind");
        let pts = spec["mounts"][2]["options"].as_array().unwrap();
        assert!(!pts.iter().any(|o| o == "gid=5"));
        assert_eq!(pts.len(), 5);
    }

    #[test]
    fn rendered_with_tabs_as_runc_indents() {
        let t = render(&json!({ "a": [1] }));
        assert_eq!(t, "{\n\t\"a\": [\n\t\t1\n\t]\n}\n");
    }

    /// What `runc spec` of runc 1.1.5 wrote.
    const RUNC_SPEC: &str = r#"{
	"ociVersion": "1.0.2-dev",
	"process": {
		"terminal": true,
		"user": {
			"uid": 0,
			"gid": 0
		},
		"args": [
			"sh"
		],
		"env": [
			"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"TERM=xterm"
		],
		"cwd": "/",
		"capabilities": {
			"bounding": [
				"CAP_AUDIT_WRITE",
				"CAP_KILL",
				"CAP_NET_BIND_SERVICE"
			],
			"effective": [
				"CAP_AUDIT_WRITE",
				"CAP_KILL",
				"CAP_NET_BIND_SERVICE"
			],
			"permitted": [
				"CAP_AUDIT_WRITE",
				"CAP_KILL",
				"CAP_NET_BIND_SERVICE"
			],
			"ambient": [
				"CAP_AUDIT_WRITE",
				"CAP_KILL",
				"CAP_NET_BIND_SERVICE"
			]
		},
		"rlimits": [
			{
				"type": "RLIMIT_NOFILE",
				"hard": 1024,
				"soft": 1024
			}
		],
		"noNewPrivileges": true
	},
	"root": {
		"path": "rootfs",
		"readonly": true
	},
	"hostname": "runc",
	"mounts": [
		{
			"destination": "/proc",
			"type": "proc",
			"source": "proc"
		},
		{
			"destination": "/dev",
			"type": "tmpfs",
			"source": "tmpfs",
			"options": [
				"nosuid",
				"strictatime",
				"mode=755",
				"size=65536k"
			]
		},
		{
			"destination": "/dev/pts",
			"type": "devpts",
			"source": "devpts",
			"options": [
				"nosuid",
				"noexec",
				"newinstance",
				"ptmxmode=0666",
				"mode=0620",
				"gid=5"
			]
		},
		{
			"destination": "/dev/shm",
			"type": "tmpfs",
			"source": "shm",
			"options": [
				"nosuid",
				"noexec",
				"nodev",
				"mode=1777",
				"size=65536k"
			]
		},
		{
			"destination": "/dev/mqueue",
			"type": "mqueue",
			"source": "mqueue",
			"options": [
				"nosuid",
				"noexec",
				"nodev"
			]
		},
		{
			"destination": "/sys",
			"type": "sysfs",
			"source": "sysfs",
			"options": [
				"nosuid",
				"noexec",
				"nodev",
				"ro"
			]
		},
		{
			"destination": "/sys/fs/cgroup",
			"type": "cgroup",
			"source": "cgroup",
			"options": [
				"nosuid",
				"noexec",
				"nodev",
				"relatime",
				"ro"
			]
		}
	],
	"linux": {
		"resources": {
			"devices": [
				{
					"allow": false,
					"access": "rwm"
				}
			]
		},
		"namespaces": [
			{
				"type": "pid"
			},
			{
				"type": "network"
			},
			{
				"type": "ipc"
			},
			{
				"type": "uts"
			},
			{
				"type": "mount"
			}
		],
		"maskedPaths": [
			"/proc/acpi",
			"/proc/asound",
			"/proc/kcore",
			"/proc/keys",
			"/proc/latency_stats",
			"/proc/timer_list",
			"/proc/timer_stats",
			"/proc/sched_debug",
			"/sys/firmware",
			"/proc/scsi"
		],
		"readonlyPaths": [
			"/proc/bus",
			"/proc/fs",
			"/proc/irq",
			"/proc/sys",
			"/proc/sysrq-trigger"
		]
	}
}"#;

    fn normal(v: &Value) -> String {
        serde_json::to_string_pretty(v).unwrap()
    }

    #[test]
    fn the_same_document_as_runc_1_1_wrote() {
        let theirs: Value = serde_json::from_str(RUNC_SPEC).unwrap();
        assert_eq!(normal(&template(false)), normal(&theirs));
    }

    /// The template against what the installed runc writes, both forms.
    #[test]
    #[ignore = "needs runc installed (the oracle)"]
    fn the_same_document_as_runc_spec() {
        let runc = ["/usr/sbin/runc", "/usr/bin/runc"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists())
            .expect("runc is installed");
        for rootless in [false, true] {
            let dir =
                std::env::temp_dir().join(format!("podinit-spec-{}", crate::util::random_hex(4)));
            std::fs::create_dir_all(&dir).unwrap();
            let mut cmd = std::process::Command::new(runc);
            cmd.arg("spec").current_dir(&dir);
            if rootless {
                cmd.arg("--rootless");
            }
            let st = cmd.status().unwrap();
            let written = std::fs::read_to_string(dir.join("config.json"));
            let _ = std::fs::remove_dir_all(&dir);
            assert!(st.success());
            let theirs: Value = serde_json::from_str(&written.unwrap()).unwrap();
            assert_eq!(
                normal(&template(rootless)),
                normal(&theirs),
                "rootless: {rootless}"
            );
        }
    }
}
