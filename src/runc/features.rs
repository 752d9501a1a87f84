//! `features`: the OCI runtime features document (runtime-spec features.md) of what this
//! runtime accepts.
//!
//! Each list is what the runtime's own code does with the names, asked of that code
//! (mount options of `runtime::mounts::plan`, seccomp actions, operators and
//! architectures of `runtime::seccomp::compile`, capabilities of the `caps` crate that
//! parses them), out of the vocabulary runc 1.1 reports, so the document cannot claim
//! what the code would refuse or pass on untouched.

use serde_json::{json, Value};
use std::path::Path;

/// The runtime-spec versions a config.json may declare: 1.0.0 up to any 1.3 patch.
pub const OCI_VERSION_MIN: &str = "1.0.0";
pub const OCI_VERSION_MAX: &str = "1.3.0";

/// The hooks, in the order of a container's life.
pub const HOOKS: [&str; 6] = [
    "prestart",
    "createRuntime",
    "createContainer",
    "startContainer",
    "poststart",
    "poststop",
];

/// The namespaces a container may be given (new, or joined by path).
pub const NAMESPACES: [&str; 7] = ["cgroup", "ipc", "mount", "network", "pid", "user", "uts"];

/// Every mount option runc 1.1 knows: the universe the supported ones are taken from.
const RUNC_MOUNT_OPTIONS: &[&str] = &[
    "acl",
    "async",
    "atime",
    "bind",
    "defaults",
    "dev",
    "diratime",
    "dirsync",
    "exec",
    "iversion",
    "lazytime",
    "loud",
    "mand",
    "noacl",
    "noatime",
    "nodev",
    "nodiratime",
    "noexec",
    "noiversion",
    "nolazytime",
    "nomand",
    "norelatime",
    "nostrictatime",
    "nosuid",
    "nosymfollow",
    "private",
    "ratime",
    "rbind",
    "rdev",
    "rdiratime",
    "relatime",
    "remount",
    "rexec",
    "rnoatime",
    "rnodev",
    "rnodiratime",
    "rnoexec",
    "rnorelatime",
    "rnostrictatime",
    "rnosuid",
    "rnosymfollow",
    "ro",
    "rprivate",
    "rrelatime",
    "rro",
    "rrw",
    "rshared",
    "rslave",
    "rstrictatime",
    "rsuid",
    "rsymfollow",
    "runbindable",
    "rw",
    "shared",
    "silent",
    "slave",
    "strictatime",
    "suid",
    "symfollow",
    "sync",
    "tmpcopyup",
    "unbindable",
];

/// The seccomp vocabulary of runc 1.1 (libseccomp's names).
const SECCOMP_ACTIONS: [&str; 9] = [
    "SCMP_ACT_ALLOW",
    "SCMP_ACT_ERRNO",
    "SCMP_ACT_KILL",
    "SCMP_ACT_KILL_PROCESS",
    "SCMP_ACT_KILL_THREAD",
    "SCMP_ACT_LOG",
    "SCMP_ACT_NOTIFY",
    "SCMP_ACT_TRACE",
    "SCMP_ACT_TRAP",
];
const SECCOMP_OPERATORS: [&str; 7] = [
    "SCMP_CMP_EQ",
    "SCMP_CMP_GE",
    "SCMP_CMP_GT",
    "SCMP_CMP_LE",
    "SCMP_CMP_LT",
    "SCMP_CMP_MASKED_EQ",
    "SCMP_CMP_NE",
];
const SECCOMP_ARCHS: [&str; 16] = [
    "SCMP_ARCH_AARCH64",
    "SCMP_ARCH_ARM",
    "SCMP_ARCH_MIPS",
    "SCMP_ARCH_MIPS64",
    "SCMP_ARCH_MIPS64N32",
    "SCMP_ARCH_MIPSEL",
    "SCMP_ARCH_MIPSEL64",
    "SCMP_ARCH_MIPSEL64N32",
    "SCMP_ARCH_PPC",
    "SCMP_ARCH_PPC64",
    "SCMP_ARCH_PPC64LE",
    "SCMP_ARCH_S390",
    "SCMP_ARCH_S390X",
    "SCMP_ARCH_X32",
    "SCMP_ARCH_X86",
    "SCMP_ARCH_X86_64",
];

/// The document `podinit runc features` prints.
pub fn document() -> serde_json::Value {
    json!({
        "ociVersionMin": OCI_VERSION_MIN,
        "ociVersionMax": OCI_VERSION_MAX,
        "hooks": HOOKS,
        "mountOptions": mount_options(),
        "linux": {
            "namespaces": NAMESPACES,
            "capabilities": capabilities(),
            "cgroup": { "v1": true, "v2": true, "systemd": true, "systemdUser": false },
            "seccomp": {
                "enabled": true,
                "actions": seccomp_actions(),
                "operators": seccomp_operators(),
                "archs": seccomp_archs(),
            },
            "apparmor": { "enabled": false },
            "selinux": { "enabled": false },
        },
        "annotations": {
            "org.podinit.version": env!("CARGO_PKG_VERSION"),
            "org.podinit.checkpoint.enabled": "false",
            "org.podinit.seccomp": "built-in BPF compiler, no libseccomp",
        },
    })
}

/// Whether a config.json's `ociVersion` is one this runtime takes: 1.0.0 to 1.3.x, a
/// pre-release of those included (runc writes "1.0.2-dev").
pub fn accepts_oci_version(v: &str) -> bool {
    let core = v.split(['-', '+']).next().unwrap_or("");
    let n: Vec<Option<u32>> = core.split('.').map(|p| p.parse().ok()).collect();
    matches!(n[..], [Some(1), Some(minor), Some(_)] if minor <= 3)
}

/// The options `mounts::plan` turns into mount flags or propagation; any other is handed
/// to the filesystem as data.
fn mount_options() -> Vec<&'static str> {
    let mut out: Vec<&str> = RUNC_MOUNT_OPTIONS
        .iter()
        .copied()
        .filter(|o| {
            let p = crate::runtime::mounts::plan(
                Path::new("/mnt"),
                Some("tmpfs"),
                None,
                &[o.to_string()],
            );
            p.data.is_empty()
        })
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// Every capability the caps crate (which parses them) knows, in the kernel's order.
fn capabilities() -> Vec<String> {
    let mut all: Vec<caps::Capability> = caps::all().into_iter().collect();
    all.sort_by_key(|c| c.index());
    all.iter().map(|c| c.to_string()).collect()
}

fn compiles(profile: Value) -> bool {
    crate::tracked::deserialize(&profile)
        .is_ok_and(|s| crate::runtime::seccomp::compile(&s).is_ok())
}

fn seccomp_actions() -> Vec<&'static str> {
    SECCOMP_ACTIONS
        .into_iter()
        .filter(|a| compiles(json!({ "defaultAction": a })))
        .collect()
}

fn seccomp_operators() -> Vec<&'static str> {
    SECCOMP_OPERATORS
        .into_iter()
        .filter(|op| {
            compiles(json!({
                "defaultAction": "SCMP_ACT_ALLOW",
                "syscalls": [{
                    "names": ["getpid"], "action": "SCMP_ACT_ERRNO",
                    "args": [{ "index": 0, "value": 1, "valueTwo": 1, "op": op }],
                }],
            }))
        })
        .collect()
}

/// The native architecture and those whose syscalls the filter also tells apart (a
/// profile naming any other compiles to the same program: their calls are refused as
/// a foreign architecture's).
fn seccomp_archs() -> Vec<&'static str> {
    let program = |archs: &[&str]| {
        let profile = json!({
            "defaultAction": "SCMP_ACT_ERRNO",
            "architectures": archs,
            "syscalls": [{ "names": ["getpid"], "action": "SCMP_ACT_ALLOW" }],
        });
        crate::tracked::deserialize(&profile)
            .ok()
            .and_then(|s| crate::runtime::seccomp::compile(&s).ok())
            .map(|f| {
                f.program
                    .iter()
                    .map(|i| (i.code, i.jt, i.jf, i.k))
                    .collect::<Vec<_>>()
            })
    };
    let native = program(&[]);
    SECCOMP_ARCHS
        .into_iter()
        .filter(|a| *a == native_arch() || program(&[a]) != native)
        .collect()
}

fn native_arch() -> &'static str {
    if cfg!(target_arch = "x86_64") {
        "SCMP_ARCH_X86_64"
    } else if cfg!(target_arch = "aarch64") {
        "SCMP_ARCH_AARCH64"
    } else {
        ""
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_valid_features_document() {
        let doc = document();
        let f: oci_spec::runtime::Features =
            serde_json::from_value(doc.clone()).expect("parses as runtime-spec features");
        assert_eq!(f.oci_version_min(), "1.0.0");
        let linux = f.linux().as_ref().unwrap();
        assert_eq!(linux.namespaces().as_ref().unwrap().len(), 7);
        assert_eq!(doc["linux"]["cgroup"]["systemd"], true);
        assert_eq!(doc["linux"]["apparmor"]["enabled"], false);
    }

    #[test]
    fn the_six_hooks_are_the_spec_s() {
        for h in HOOKS {
            let hooks: oci_spec::runtime::Hooks =
                serde_json::from_value(json!({ h: [{ "path": "/bin/true" }] })).unwrap();
            let back = serde_json::to_value(hooks).unwrap();
            assert!(back.get(h).is_some(), "{h} is a field of the spec's hooks");
        }
    }

    #[test]
    fn mount_options_are_those_the_mount_code_knows() {
        let opts = mount_options();
        for o in [
            "ro", "rw", "nosuid", "bind", "rbind", "rprivate", "relatime", "remount",
        ] {
            assert!(opts.contains(&o), "{o}");
        }
        // Recursive mount attributes are mount_setattr's (critest looks for rro).
        for o in ["rro", "rrw", "rnoexec", "rnosymfollow"] {
            assert!(opts.contains(&o), "{o}");
        }
        // runc's own tmpcopyup and the filesystems' acl are not done here.
        for o in ["tmpcopyup", "acl"] {
            assert!(!opts.contains(&o), "{o}");
        }
        let mut sorted = opts.clone();
        sorted.sort_unstable();
        assert_eq!(opts, sorted);
    }

    #[test]
    fn capabilities_in_the_kernel_s_order() {
        let caps = capabilities();
        assert_eq!(caps[0], "CAP_CHOWN");
        assert_eq!(caps[21], "CAP_SYS_ADMIN");
        assert!(caps.len() >= 41, "{}", caps.len());
    }

    #[test]
    fn seccomp_lists_what_the_compiler_takes() {
        let actions = seccomp_actions();
        assert!(actions.contains(&"SCMP_ACT_ERRNO") && actions.contains(&"SCMP_ACT_LOG"));
        assert!(
            !actions.contains(&"SCMP_ACT_NOTIFY"),
            "no notify fd support"
        );
        assert_eq!(seccomp_operators(), SECCOMP_OPERATORS);
        if cfg!(target_arch = "x86_64") {
            assert_eq!(
                seccomp_archs(),
                ["SCMP_ARCH_X32", "SCMP_ARCH_X86", "SCMP_ARCH_X86_64"]
            );
        }
    }

    #[test]
    fn oci_versions_1_0_to_1_3() {
        for v in ["1.0.0", "1.0.2-dev", "1.1.0", "1.2.1", "1.3.0", "1.3.7"] {
            assert!(accepts_oci_version(v), "{v}");
        }
        for v in ["0.6.0", "1.4.0", "2.0.0", "1.0", "", "x"] {
            assert!(!accepts_oci_version(v), "{v}");
        }
    }
}
