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

/// The document as runc writes it: `json.MarshalIndent` of its Go structs, so each
/// object's keys in the order the runtime-spec declares its fields, indented with `indent`
/// (tabs for `spec`), no newline after it.
pub fn render(spec: &Value, indent: &[u8]) -> String {
    let mut out = Vec::new();
    let fmt = serde_json::ser::PrettyFormatter::with_indent(indent);
    let mut ser = serde_json::Serializer::with_formatter(&mut out, fmt);
    serde::Serialize::serialize(&GoOrder(spec, Kind::Spec), &mut ser)
        .expect("a JSON value serializes");
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

/// The runtime-spec's Go structs a template holds, for their field order.
#[derive(Clone, Copy)]
enum Kind {
    Spec,
    Process,
    User,
    Capabilities,
    Rlimit,
    Root,
    Mount,
    Linux,
    IdMapping,
    Resources,
    DeviceCgroup,
    Namespace,
    /// Anything else: keys as serde_json sorts them.
    Other,
}

impl Kind {
    /// The JSON names of the struct's fields, in their Go declaration order (runtime-spec
    /// `specs-go/config.go`).
    fn fields(self) -> &'static [&'static str] {
        match self {
            Kind::Spec => &[
                "ociVersion",
                "process",
                "root",
                "hostname",
                "domainname",
                "mounts",
                "hooks",
                "annotations",
                "linux",
            ],
            Kind::Process => &[
                "terminal",
                "consoleSize",
                "user",
                "args",
                "commandLine",
                "env",
                "cwd",
                "capabilities",
                "rlimits",
                "noNewPrivileges",
                "apparmorProfile",
                "oomScoreAdj",
                "selinuxLabel",
            ],
            Kind::User => &["uid", "gid", "umask", "additionalGids", "username"],
            Kind::Capabilities => &[
                "bounding",
                "effective",
                "inheritable",
                "permitted",
                "ambient",
            ],
            Kind::Rlimit => &["type", "hard", "soft"],
            Kind::Root => &["path", "readonly"],
            Kind::Mount => &["destination", "type", "source", "options"],
            Kind::Linux => &[
                "uidMappings",
                "gidMappings",
                "sysctl",
                "resources",
                "cgroupsPath",
                "namespaces",
                "devices",
                "seccomp",
                "rootfsPropagation",
                "maskedPaths",
                "readonlyPaths",
                "mountLabel",
                "intelRdt",
                "personality",
            ],
            Kind::IdMapping => &["containerID", "hostID", "size"],
            Kind::Resources => &[
                "devices",
                "memory",
                "cpu",
                "pids",
                "blockIO",
                "hugepageLimits",
                "network",
                "rdma",
                "unified",
            ],
            Kind::DeviceCgroup => &["allow", "type", "major", "minor", "access"],
            Kind::Namespace => &["type", "path"],
            Kind::Other => &[],
        }
    }

    /// The struct under field `key` of this one (or of each element of its array).
    fn child(self, key: &str) -> Kind {
        match (self, key) {
            (Kind::Spec, "process") => Kind::Process,
            (Kind::Spec, "root") => Kind::Root,
            (Kind::Spec, "mounts") => Kind::Mount,
            (Kind::Spec, "linux") => Kind::Linux,
            (Kind::Process, "user") => Kind::User,
            (Kind::Process, "capabilities") => Kind::Capabilities,
            (Kind::Process, "rlimits") => Kind::Rlimit,
            (Kind::Linux, "uidMappings" | "gidMappings") => Kind::IdMapping,
            (Kind::Linux, "resources") => Kind::Resources,
            (Kind::Linux, "namespaces") => Kind::Namespace,
            (Kind::Resources, "devices") => Kind::DeviceCgroup,
            _ => Kind::Other,
        }
    }
}

/// A value serialized with its objects' keys in `Kind`'s order, unknown keys after them.
struct GoOrder<'a>(&'a Value, Kind);

impl serde::Serialize for GoOrder<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        match self.0 {
            Value::Object(m) => {
                let fields = self.1.fields();
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort_by_key(|k| fields.iter().position(|f| f == k).unwrap_or(fields.len()));
                let mut map = s.serialize_map(Some(keys.len()))?;
                for k in keys {
                    map.serialize_entry(k, &GoOrder(&m[k], self.1.child(k)))?;
                }
                map.end()
            }
            Value::Array(a) => {
                let mut seq = s.serialize_seq(Some(a.len()))?;
                for v in a {
                    seq.serialize_element(&GoOrder(v, self.1))?;
                }
                seq.end()
            }
            v => v.serialize(s),
        }
    }
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
        let t = render(&json!({ "a": [1] }), b"\t");
        assert_eq!(t, "{\n\t\"a\": [\n\t\t1\n\t]\n}");
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

    /// Byte for byte: a caller may read runc's keys in their order.
    #[test]
    fn the_same_document_as_runc_1_1_wrote() {
        assert_eq!(render(&template(false), b"\t"), RUNC_SPEC);
    }

    #[test]
    fn keys_in_the_go_structs_order_unknown_ones_after() {
        let v = json!({
            "zz": 1, "linux": { "namespaces": [{ "path": "/p", "type": "pid" }] },
            "ociVersion": "1", "aa": 2, "process": { "cwd": "/", "args": ["sh"] },
        });
        let t = render(&v, b"");
        let order: Vec<usize> = [
            "ociVersion",
            "process",
            "args",
            "cwd",
            "linux",
            "\"type",
            "\"path",
            "aa",
            "zz",
        ]
        .iter()
        .map(|k| t.find(k).unwrap())
        .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{t}");
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
            assert_eq!(
                render(&template(rootless), b"\t"),
                written.unwrap(),
                "rootless: {rootless}"
            );
        }
    }
}
