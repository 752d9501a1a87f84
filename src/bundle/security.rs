//! The security part of the merge: user and groups, capabilities, a privileged
//! container's spec, and the device cgroup rules.

use k8s_openapi::api::core::v1::{Container, PodSpec};
use serde_json::{json, Value};

use super::merge::{obj, strings};
use super::Bundle;

/// The capability names Kubernetes accepts, as OCI writes them.
fn cap_name(n: &str) -> String {
    let n = n.to_ascii_uppercase();
    if n.starts_with("CAP_") {
        n
    } else {
        format!("CAP_{n}")
    }
}

fn all_caps() -> Vec<String> {
    caps::all()
        .iter()
        .map(|c| c.to_string())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect()
}

pub(super) fn security(
    v: &mut Value,
    b: &Bundle,
    pod: &PodSpec,
    c: &Container,
) -> Result<(), String> {
    let psc = pod.security_context.clone().unwrap_or_default();
    let csc = c.security_context.clone().unwrap_or_default();
    let user = &mut obj(v, "process")["user"];
    if !user.is_object() {
        *user = json!({"uid": 0, "gid": 0});
    }
    let run_as_user = csc.run_as_user.or(psc.run_as_user);
    let run_as_group = csc.run_as_group.or(psc.run_as_group);
    // `Strict`: only runAsGroup, supplementalGroups and fsGroup, nothing the image's
    // /etc/group or config adds (the CRI's SupplementalGroupsPolicy).
    let strict = psc.supplemental_groups_policy.as_deref() == Some("Strict");
    if strict {
        user["additionalGids"] = json!([]);
    }
    let mut extra_gids: Vec<i64> = Vec::new();
    let uid = run_as_user.or_else(|| user["uid"].as_i64()).unwrap_or(0);
    let (passwd_gid, groups) = passwd_lookup(b, uid);
    if run_as_user.is_some() {
        user["uid"] = json!(uid);
        if run_as_group.is_none() {
            user["gid"] = json!(passwd_gid);
        }
    }
    // `Merge`: the groups /etc/group lists the user in, as containerd's
    // WithAdditionalGIDs adds them for the image's user or runAsUser.
    if !strict {
        extra_gids.extend(groups);
    }
    if let Some(gid) = run_as_group {
        user["gid"] = json!(gid);
    }
    extra_gids.extend(psc.supplemental_groups.iter().flatten());
    extra_gids.extend(psc.fs_group);
    if !extra_gids.is_empty() {
        let mut all: Vec<i64> = user["additionalGids"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_i64).collect())
            .unwrap_or_default();
        for g in extra_gids {
            if !all.contains(&g) {
                all.push(g);
            }
        }
        user["additionalGids"] = json!(all);
    }
    let uid = user["uid"].as_i64().unwrap_or(0);
    if csc.run_as_non_root.or(psc.run_as_non_root) == Some(true) && uid == 0 {
        return Err("container has runAsNonRoot and image will run as root".into());
    }

    let privileged = csc.privileged == Some(true);
    if let Some(caps) = csc.capabilities.as_ref().filter(|_| !privileged) {
        let adds: Vec<String> = caps.add.iter().flatten().map(|s| cap_name(s)).collect();
        let drops: Vec<String> = caps.drop.iter().flatten().map(|s| cap_name(s)).collect();
        let pcaps = obj(obj(v, "process"), "capabilities");
        for set in ["bounding", "effective", "permitted"] {
            let mut cur = strings(&pcaps[set]);
            if adds.iter().any(|a| a == "CAP_ALL") {
                cur = all_caps();
            }
            if drops.iter().any(|d| d == "CAP_ALL") {
                cur.clear();
            }
            for a in adds.iter().filter(|a| *a != "CAP_ALL") {
                if !cur.contains(a) {
                    cur.push(a.clone());
                }
            }
            cur.retain(|x| !drops.contains(x));
            pcaps[set] = json!(cur);
        }
        for set in ["inheritable", "ambient"] {
            let mut cur = strings(&pcaps[set]);
            if drops.iter().any(|d| d == "CAP_ALL") {
                cur.clear();
            }
            cur.retain(|x| !drops.contains(x));
            pcaps[set] = json!(cur);
        }
    }
    if let Some(ro) = csc.read_only_root_filesystem {
        obj(v, "root")["readonly"] = json!(ro);
    }
    if let Some(ape) = csc.allow_privilege_escalation {
        obj(v, "process")["noNewPrivileges"] = json!(!ape);
    }
    Ok(())
}

/// The capabilities podinit holds (containerd's `cap.Current()`), sorted.
pub(super) fn held_caps() -> Vec<String> {
    caps::read(None, caps::CapSet::Effective)
        .map(|set| {
            let names: std::collections::BTreeSet<String> =
                set.iter().map(|c| c.to_string()).collect();
            names.into_iter().collect()
        })
        .unwrap_or_else(|_| all_caps())
}

/// `privileged: true`, as containerd's CRI makes it: every capability podinit itself holds
/// (asking for more would fail capset where podinit runs with a narrowed bounding set),
/// nothing masked or read-only in /proc, /sys and the cgroup filesystem writable, and the
/// host's devices.
pub(super) fn privileged_spec(v: &mut Value) {
    let held = held_caps();
    let pcaps = obj(obj(v, "process"), "capabilities");
    for set in ["bounding", "effective", "permitted"] {
        pcaps[set] = json!(held);
    }
    let linux = obj(v, "linux");
    if let Some(l) = linux.as_object_mut() {
        l.remove("maskedPaths");
        l.remove("readonlyPaths");
    }
    let mut devices = linux["devices"].as_array().cloned().unwrap_or_default();
    for n in crate::sys::devices::host_nodes() {
        if !devices.iter().any(|d| d["path"] == json!(n.path)) {
            devices.push(
                json!({"path": n.path, "type": n.kind.to_string(), "major": n.major,
                                "minor": n.minor, "fileMode": n.mode, "uid": 0, "gid": 0}),
            );
        }
    }
    linux["devices"] = json!(devices);
    for m in v["mounts"].as_array_mut().into_iter().flatten() {
        if matches!(m["type"].as_str(), Some("sysfs" | "cgroup" | "cgroup2")) {
            if let Some(opts) = m["options"].as_array_mut() {
                for o in opts.iter_mut() {
                    if o == "ro" {
                        *o = json!("rw");
                    }
                }
            }
        }
    }
}

/// The device cgroup rules: the runtime's defaults, then the bundle's own, then one for
/// each node the spec creates; a privileged container may use every device.
pub(super) fn devices(v: &mut Value, privileged: bool) {
    let linux = obj(v, "linux");
    let mut rules: Vec<Value> = crate::sys::devices::defaults()
        .iter()
        .map(|r| {
            let mut j = json!({"allow": r.allow, "type": r.kind.to_string(), "access": r.access});
            if let Some(m) = r.major {
                j["major"] = json!(m);
            }
            if let Some(m) = r.minor {
                j["minor"] = json!(m);
            }
            j
        })
        .collect();
    rules.extend(
        linux["resources"]["devices"]
            .as_array()
            .cloned()
            .unwrap_or_default(),
    );
    for d in linux["devices"].as_array().into_iter().flatten() {
        rules.push(
            json!({"allow": true, "type": d["type"], "major": d["major"],
                          "minor": d["minor"], "access": "rwm"}),
        );
    }
    if privileged {
        rules.push(json!({"allow": true, "type": "a", "access": "rwm"}));
    }
    obj(obj(v, "linux"), "resources")["devices"] = json!(rules);
}

/// The primary gid of `uid` and the groups it belongs to, from the rootfs' `/etc/passwd`
/// and `/etc/group` (0 and none when it is not listed), as containerd does for a bare uid.
fn passwd_lookup(b: &Bundle, uid: i64) -> (i64, Vec<i64>) {
    let passwd = b.read_file("etc/passwd").unwrap_or_default();
    let entry = passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() >= 4 && f[2].parse::<i64>().ok() == Some(uid))
            .then(|| (f[0].to_string(), f[3].parse::<i64>().unwrap_or(0)))
    });
    let Some((name, gid)) = entry else {
        return (0, Vec::new());
    };
    let group = b.read_file("etc/group").unwrap_or_default();
    let groups = group
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            let member = f.len() >= 4 && f[3].split(',').any(|m| m == name);
            let g = f.get(2)?.parse::<i64>().ok()?;
            (member && g != gid).then_some(g)
        })
        .collect();
    (gid, groups)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The image user's groups in a rootfs of its own; the process's user after the merge.
    fn groups_with(pod_sc: &str, csc: &str, image_user: Value) -> (i64, i64, Vec<i64>) {
        let root = std::env::temp_dir().join(format!(
            "podinit-sgp-{}-{}",
            std::process::id(),
            crate::util::random_hex(4)
        ));
        std::fs::create_dir_all(root.join("etc")).unwrap();
        std::fs::write(
            root.join("etc/passwd"),
            "root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000:app:/home/app:/bin/sh\n",
        )
        .unwrap();
        std::fs::write(
            root.join("etc/group"),
            "root:x:0:\napp:x:1000:\nusers:x:100:app\nwheel:x:10:root,app\n",
        )
        .unwrap();
        let b = Bundle::of_dir(root.clone(), root.clone(), Default::default());
        let pod: PodSpec =
            serde_yaml_ng::from_str(&format!("containers: []\nsecurityContext: {pod_sc}")).unwrap();
        let c: Container =
            serde_yaml_ng::from_str(&format!("name: c\nsecurityContext: {csc}")).unwrap();
        let mut v = json!({"process": {"user": image_user}});
        security(&mut v, &b, &pod, &c).unwrap();
        std::fs::remove_dir_all(&root).unwrap();
        let u = &v["process"]["user"];
        let gids = u["additionalGids"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_i64).collect())
            .unwrap_or_default();
        (u["uid"].as_i64().unwrap(), u["gid"].as_i64().unwrap(), gids)
    }

    #[test]
    fn merge_adds_the_image_groups_and_strict_does_not() {
        let image = json!({"uid": 0, "gid": 0, "additionalGids": [42]});
        assert_eq!(
            groups_with(
                "{runAsUser: 1000, runAsGroup: 3000, supplementalGroups: [4000]}",
                "{}",
                image.clone()
            ),
            (1000, 3000, vec![42, 100, 10, 4000]),
            "Merge is the default"
        );
        assert_eq!(
            groups_with("{runAsUser: 1000, runAsGroup: 3000, supplementalGroups: [4000], fsGroup: 5000, supplementalGroupsPolicy: Strict}", "{}", image.clone()),
            (1000, 3000, vec![4000, 5000])
        );
        // Without runAsUser, the image's user's groups (containerd's WithAdditionalGIDs).
        assert_eq!(
            groups_with(
                "{supplementalGroupsPolicy: Merge}",
                "{}",
                json!({"uid": 0, "gid": 0})
            ),
            (0, 0, vec![10])
        );
        assert_eq!(
            groups_with("{}", "{runAsUser: 1000}", json!({"uid": 0, "gid": 0})),
            (1000, 1000, vec![100, 10]),
            "the primary gid from /etc/passwd"
        );
    }
}
