//! Lay a Kubernetes container over a bundle's `config.json` (the rules are in the module
//! doc of `bundle`). Works on the spec's JSON form, which keeps every field of the bundle
//! that podinit does not touch exactly as written.

use k8s_openapi::api::core::v1::{Container, PodSpec};
use oci_spec::runtime::Spec;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Component, Path};

use super::{Bundle, MergeContext};
use crate::quantity;

const DEFAULT_PATH: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// CFS period for CPU limits, as kubelet uses (100 ms).
const CPU_PERIOD_US: u64 = 100_000;
const MIN_QUOTA_US: i64 = 1000;
const MIN_SHARES: u64 = 2;

/// The container's effective OCI spec. Errors name the container and the field.
pub fn merge(b: &Bundle, pod: &PodSpec, c: &Container, cx: &MergeContext) -> Result<Spec, String> {
    let who = |field: &str, e: String| format!("container {}: {field}: {e}", c.name);
    let mut v = serde_json::to_value(&b.spec).map_err(|e| who("config.json", e.to_string()))?;
    let process = obj(&mut v, "process");

    // Environment first: command and args expand against it.
    let mut env: Vec<(String, String)> = strings(&process["env"])
        .iter()
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => (kv.clone(), String::new()),
        })
        .collect();
    let mut own: BTreeMap<String, String> = BTreeMap::new();
    match cx.env {
        Some(resolved) => {
            for (k, v) in resolved {
                own.insert(k.clone(), v.clone());
                set_env(&mut env, k, v.clone());
            }
        }
        None => {
            for e in c.env.iter().flatten() {
                let value = expand(e.value.as_deref().unwrap_or(""), &own);
                own.insert(e.name.clone(), value.clone());
                set_env(&mut env, &e.name, value);
            }
        }
    }
    if !own.contains_key("HOSTNAME") {
        set_env(&mut env, "HOSTNAME", cx.hostname.to_string());
    }
    if !env.iter().any(|(k, _)| k == "PATH") {
        let (k, v) = DEFAULT_PATH.split_once('=').unwrap();
        env.insert(0, (k.into(), v.into()));
    }
    process["env"] = json!(env
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>());

    let bundle_args = strings(&process["args"]);
    let command: Option<Vec<String>> = c.command.clone();
    let args: Option<Vec<String>> = c.args.clone();
    let mut argv: Vec<String> = match (command, args) {
        (Some(cmd), Some(a)) => cmd.into_iter().chain(a).collect(),
        (Some(cmd), None) => cmd,
        (None, Some(a)) => bundle_args.iter().take(1).cloned().chain(a).collect(),
        (None, None) => bundle_args,
    };
    argv = argv.iter().map(|a| expand(a, &own)).collect();
    if argv.is_empty() {
        return Err(who(
            "command",
            "Required value: the bundle has no process.args and the container sets no command"
                .into(),
        ));
    }
    process["args"] = json!(argv);
    if let Some(wd) = &c.working_dir {
        process["cwd"] = json!(wd);
    }
    if let Some(adj) = cx.oom_score_adj {
        process["oomScoreAdj"] = json!(adj);
    }

    security(&mut v, b, pod, c).map_err(|e| who("securityContext", e))?;
    resources(&mut v, c).map_err(|e| who("resources", e))?;
    let privileged = c
        .security_context
        .as_ref()
        .and_then(|s| s.privileged)
        .unwrap_or(false);
    if privileged {
        privileged_spec(&mut v);
    }
    // After the capabilities: the default profile depends on the bounding set.
    super::seccomp::apply(&mut v, pod, c, cx.seccomp_root)
        .map_err(|e| format!("container {}: {e}", c.name))?;
    devices(&mut v, privileged);
    mounts(&mut v, c, cx).map_err(|e| format!("container {}: {e}", c.name))?;
    namespaces(&mut v, cx.share_process_namespace)
        .map_err(|e| who("config.json: linux.namespaces", e))?;

    v["root"]["path"] = json!(b.rootfs);
    if let Some(m) = v.as_object_mut() {
        m.remove("hostname");
        m.remove("domainname");
    }
    if let Some(l) = v.get_mut("linux").and_then(Value::as_object_mut) {
        l.remove("cgroupsPath");
    }
    serde_json::from_value(v).map_err(|e| who("effective spec", e.to_string()))
}

/// `v[key]` as an object, created if missing.
fn obj<'a>(v: &'a mut Value, key: &str) -> &'a mut Value {
    let o = v.as_object_mut().expect("an object");
    let e = o.entry(key).or_insert_with(|| json!({}));
    if !e.is_object() {
        *e = json!({});
    }
    e
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn set_env(env: &mut Vec<(String, String)>, k: &str, v: String) {
    match env.iter_mut().find(|(n, _)| n == k) {
        Some(e) => e.1 = v,
        None => env.push((k.to_string(), v)),
    }
}

/// Kubernetes' `$(VAR)` expansion: `$$` is a literal `$`, an unknown `$(X)` stays.
pub fn expand(s: &str, vars: &BTreeMap<String, String>) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'$' && i + 1 < b.len() {
            if b[i + 1] == b'$' {
                out.push('$');
                i += 2;
                continue;
            }
            if b[i + 1] == b'(' {
                if let Some(end) = s[i + 2..].find(')') {
                    let name = &s[i + 2..i + 2 + end];
                    match vars.get(name) {
                        Some(v) => out.push_str(v),
                        None => out.push_str(&s[i..i + 3 + end]),
                    }
                    i += 3 + end;
                    continue;
                }
            }
        }
        let ch = s[i..].chars().next().unwrap();
        out.push(ch);
        i += ch.len_utf8();
    }
    out
}

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

fn security(v: &mut Value, b: &Bundle, pod: &PodSpec, c: &Container) -> Result<(), String> {
    let psc = pod.security_context.clone().unwrap_or_default();
    let csc = c.security_context.clone().unwrap_or_default();
    let user = &mut obj(v, "process")["user"];
    if !user.is_object() {
        *user = json!({"uid": 0, "gid": 0});
    }
    let run_as_user = csc.run_as_user.or(psc.run_as_user);
    let run_as_group = csc.run_as_group.or(psc.run_as_group);
    let mut extra_gids: Vec<i64> = Vec::new();
    if let Some(uid) = run_as_user {
        user["uid"] = json!(uid);
        let (gid, groups) = passwd_lookup(&b.rootfs, uid);
        if run_as_group.is_none() {
            user["gid"] = json!(gid);
        }
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
fn held_caps() -> Vec<String> {
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
fn privileged_spec(v: &mut Value) {
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
fn devices(v: &mut Value, privileged: bool) {
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
fn passwd_lookup(rootfs: &Path, uid: i64) -> (i64, Vec<i64>) {
    let passwd = std::fs::read_to_string(rootfs.join("etc/passwd")).unwrap_or_default();
    let entry = passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() >= 4 && f[2].parse::<i64>().ok() == Some(uid))
            .then(|| (f[0].to_string(), f[3].parse::<i64>().unwrap_or(0)))
    });
    let Some((name, gid)) = entry else {
        return (0, Vec::new());
    };
    let group = std::fs::read_to_string(rootfs.join("etc/group")).unwrap_or_default();
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

fn resources(v: &mut Value, c: &Container) -> Result<(), String> {
    let Some(res) = &c.resources else {
        return Ok(());
    };
    let get =
        |m: &Option<BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
         k: &str|
         -> Result<Option<quantity::Quantity>, String> {
            match m.as_ref().and_then(|m| m.get(k)) {
                None => Ok(None),
                Some(q) => quantity::parse(&q.0)
                    .map(Some)
                    .map_err(|e| format!("{k}: {e}")),
            }
        };
    let lr = obj(obj(v, "linux"), "resources");
    let cpu_limit = get(&res.limits, "cpu")?;
    let cpu_request = get(&res.requests, "cpu")?.or(cpu_limit);
    let cpu = obj(lr, "cpu");
    let shares = cpu_request.map_or(MIN_SHARES, |q| {
        ((q.milli() * 1024 / 1000) as u64).max(MIN_SHARES)
    });
    cpu["shares"] = json!(shares);
    if let Some(q) = cpu_limit {
        let quota = ((q.milli() * CPU_PERIOD_US as i128) / 1000) as i64;
        cpu["quota"] = json!(quota.max(MIN_QUOTA_US));
        cpu["period"] = json!(CPU_PERIOD_US);
    }
    if let Some(q) = get(&res.limits, "memory")? {
        obj(lr, "memory")["limit"] = json!(q.value() as i64);
    }
    let mut huge = Vec::new();
    for (k, _) in res.limits.iter().flatten() {
        if let Some(size) = k.strip_prefix("hugepages-") {
            let q = get(&res.limits, k)?.unwrap();
            huge.push(
                json!({"pageSize": quantity::hugepage_size(size)?, "limit": q.value() as i64}),
            );
        }
    }
    if !huge.is_empty() {
        lr["hugepageLimits"] = json!(huge);
    }
    Ok(())
}

fn mounts(v: &mut Value, c: &Container, cx: &MergeContext) -> Result<(), String> {
    let mut list: Vec<Value> = v["mounts"].as_array().cloned().unwrap_or_default();
    let add = |m: Value, list: &mut Vec<Value>| {
        list.retain(|x| x["destination"] != m["destination"]);
        list.push(m);
    };
    for (i, vm) in c.volume_mounts.iter().flatten().enumerate() {
        let field = format!("volumeMounts[{i}]");
        let vol = cx
            .volumes
            .get(&vm.name)
            .ok_or_else(|| format!("{field}.name: Not found: {:?}", vm.name))?;
        let mut src = vol.host_path.clone();
        if let Some(sp) = vm.sub_path.as_deref().filter(|s| !s.is_empty()) {
            let p = Path::new(sp);
            if p.is_absolute() || p.components().any(|c| c == Component::ParentDir) {
                return Err(format!(
                    "{field}.subPath: Invalid value: {sp:?}: must be a relative path without '..'"
                ));
            }
            src = src.join(p);
            if !src.exists() {
                std::fs::create_dir_all(&src)
                    .map_err(|e| format!("{field}.subPath: creating {}: {e}", src.display()))?;
            }
        }
        let ro = vm.read_only.unwrap_or(false) || vol.read_only;
        add(
            json!({"destination": vm.mount_path, "type": "bind", "source": src,
                   "options": ["rbind", "rprivate", "nosuid", "nodev", if ro { "ro" } else { "rw" }]}),
            &mut list,
        );
    }
    if let Some(tl) = cx.termination_log {
        let dest = c
            .termination_message_path
            .clone()
            .unwrap_or_else(|| "/dev/termination-log".into());
        if !list.iter().any(|m| m["destination"] == dest.as_str()) {
            add(
                json!({"destination": dest, "type": "bind", "source": tl,
                       "options": ["bind", "rprivate", "nosuid", "nodev", "noexec", "rw"]}),
                &mut list,
            );
        }
    }
    for (src, dest) in cx.pod_files {
        if !list.iter().any(|m| m["destination"] == *dest) {
            add(
                json!({"destination": dest, "type": "bind", "source": src,
                       "options": ["bind", "rprivate", "nosuid", "nodev", "noexec", "rw"]}),
                &mut list,
            );
        }
    }
    v["mounts"] = json!(list);
    Ok(())
}

fn namespaces(v: &mut Value, share_pid: bool) -> Result<(), String> {
    let linux = obj(v, "linux");
    let mut kept = Vec::new();
    for ns in linux["namespaces"].as_array().cloned().unwrap_or_default() {
        let t = ns["type"].as_str().unwrap_or("").to_string();
        match t.as_str() {
            "network" | "ipc" | "uts" => continue,
            "pid" if share_pid => continue,
            "user" => return Err("user namespaces are not supported".into()),
            _ => {}
        }
        if ns.get("path").is_some_and(|p| !p.is_null() && p != "") {
            return Err(format!("a {t} namespace with a path is not supported"));
        }
        kept.push(json!({"type": t}));
    }
    for want in ["mount", "pid"] {
        if want == "pid" && share_pid {
            continue;
        }
        if !kept.iter().any(|n| n["type"] == want) {
            kept.push(json!({"type": want}));
        }
    }
    linux["namespaces"] = json!(kept);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::HostVolume;
    use oci_spec::runtime::LinuxNamespaceType;
    use std::path::PathBuf;

    fn bundle() -> Bundle {
        let spec: Spec = serde_json::from_value(json!({
            "ociVersion": "1.0.2",
            "process": {"args": ["/bin/entry", "default-cmd"], "cwd": "/", "env": ["PATH=/bin", "A=1"],
                        "user": {"uid": 0, "gid": 0},
                        "capabilities": {"bounding": ["CAP_CHOWN", "CAP_NET_RAW"], "effective": ["CAP_CHOWN", "CAP_NET_RAW"],
                                         "permitted": ["CAP_CHOWN", "CAP_NET_RAW"], "inheritable": [], "ambient": []},
                        "noNewPrivileges": false},
            "root": {"path": "rootfs", "readonly": false},
            "hostname": "bundle-host",
            "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"},
                       {"destination": "/data", "type": "tmpfs", "source": "tmpfs"}],
            "linux": {"namespaces": [{"type": "pid"}, {"type": "network"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}],
                      "cgroupsPath": "/x", "seccomp": {"defaultAction": "SCMP_ACT_LOG"}}
        }))
        .unwrap();
        Bundle {
            dir: PathBuf::from("/b"),
            rootfs: PathBuf::from("/b/rootfs"),
            spec,
        }
    }

    fn container(yaml: &str) -> Container {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    fn run(c: &Container, pod: &PodSpec, share: bool) -> Result<Spec, String> {
        run_in(c, pod, share, Path::new("/nonexistent/seccomp"))
    }

    fn run_in(c: &Container, pod: &PodSpec, share: bool, root: &Path) -> Result<Spec, String> {
        let mut vols = BTreeMap::new();
        vols.insert(
            "data".to_string(),
            HostVolume {
                host_path: PathBuf::from("/host/data"),
                read_only: false,
            },
        );
        merge(
            &bundle(),
            pod,
            c,
            &MergeContext {
                volumes: &vols,
                termination_log: Some(Path::new("/state/tl")),
                share_process_namespace: share,
                hostname: "mypod",
                env: None,
                pod_files: &[],
                oom_score_adj: None,
                seccomp_root: root,
            },
        )
    }

    fn args(s: &Spec) -> Vec<String> {
        s.process().as_ref().unwrap().args().clone().unwrap()
    }

    #[test]
    fn command_and_args_rules() {
        let pod = PodSpec::default();
        let s = run(&container("name: c"), &pod, false).unwrap();
        assert_eq!(args(&s), ["/bin/entry", "default-cmd"]);
        let s = run(&container("name: c\ncommand: [sh, -c]"), &pod, false).unwrap();
        assert_eq!(args(&s), ["sh", "-c"]);
        let s = run(&container("name: c\nargs: [x, y]"), &pod, false).unwrap();
        assert_eq!(args(&s), ["/bin/entry", "x", "y"]);
        let s = run(&container("name: c\ncommand: [echo]\nargs: [$(A), $$(A), $(NOPE)]\nenv: [{name: A, value: hi}]"), &pod, false).unwrap();
        assert_eq!(args(&s), ["echo", "hi", "$(A)", "$(NOPE)"]);
    }

    #[test]
    fn env_merges_in_order_with_hostname_and_expansion() {
        let c = container("name: c\nenv: [{name: A, value: two}, {name: B, value: '$(A)-x'}]");
        let s = run(&c, &PodSpec::default(), false).unwrap();
        let env = s.process().as_ref().unwrap().env().clone().unwrap();
        assert_eq!(env, ["PATH=/bin", "A=two", "B=two-x", "HOSTNAME=mypod"]);
        let c = container("name: c\nworkingDir: /w");
        let s = run(&c, &PodSpec::default(), false).unwrap();
        assert_eq!(s.process().as_ref().unwrap().cwd(), &PathBuf::from("/w"));
    }

    #[test]
    fn device_rules_and_privileged() {
        let pod = PodSpec::default();
        let s = serde_json::to_value(run(&container("name: c"), &pod, false).unwrap()).unwrap();
        let rules = s["linux"]["resources"]["devices"]
            .as_array()
            .unwrap()
            .clone();
        assert_eq!(
            rules[0],
            json!({"allow": false, "type": "a", "access": "rwm"})
        );
        assert!(rules.contains(
            &json!({"allow": true, "type": "c", "major": 1, "minor": 3, "access": "rwm"})
        ));
        assert!(!rules.iter().any(|r| r["allow"] == true && r["type"] == "a"));

        let c =
            container("name: c\nsecurityContext: {privileged: true, capabilities: {drop: [ALL]}}");
        let s = serde_json::to_value(run(&c, &pod, false).unwrap()).unwrap();
        let rules = s["linux"]["resources"]["devices"].as_array().unwrap();
        assert_eq!(
            rules.last().unwrap(),
            &json!({"allow": true, "type": "a", "access": "rwm"})
        );
        let sorted = |mut v: Vec<String>| {
            v.sort();
            v
        };
        assert_eq!(
            sorted(strings(&s["process"]["capabilities"]["bounding"])),
            held_caps()
        );
        assert!(s["linux"].get("maskedPaths").is_none());
        assert!(s["linux"].get("readonlyPaths").is_none());
    }

    #[test]
    fn security_context() {
        let c = container(
            "name: c\nsecurityContext: {runAsUser: 1000, runAsGroup: 2000, readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: {add: [SYS_ADMIN], drop: [NET_RAW]}}",
        );
        let pod: PodSpec = serde_yaml_ng::from_str(
            "containers: []\nsecurityContext: {supplementalGroups: [5], fsGroup: 7}",
        )
        .unwrap();
        let s = run(&c, &pod, false).unwrap();
        let p = s.process().as_ref().unwrap();
        assert_eq!((p.user().uid(), p.user().gid()), (1000, 2000));
        assert_eq!(p.user().additional_gids().clone().unwrap(), [5, 7]);
        assert_eq!(p.no_new_privileges(), Some(true));
        assert_eq!(s.root().as_ref().unwrap().readonly(), Some(true));
        // Capability sets are sets: compare them sorted.
        let set = |v: &Value| {
            let mut s = strings(v);
            s.sort();
            s
        };
        let v = serde_json::to_value(&s).unwrap();
        for which in ["bounding", "effective", "permitted"] {
            assert_eq!(
                set(&v["process"]["capabilities"][which]),
                ["CAP_CHOWN", "CAP_SYS_ADMIN"]
            );
        }
        let c = container("name: c\nsecurityContext: {capabilities: {drop: [ALL], add: [kill]}}");
        let v = serde_json::to_value(run(&c, &PodSpec::default(), false).unwrap()).unwrap();
        assert_eq!(
            v["process"]["capabilities"]["permitted"],
            json!(["CAP_KILL"])
        );
        let c = container("name: c\nsecurityContext: {runAsNonRoot: true}");
        let e = run(&c, &PodSpec::default(), false).unwrap_err();
        assert!(e.contains("container c: securityContext: container has runAsNonRoot and image will run as root"), "{e}");
    }

    #[test]
    fn resources_map_to_cgroup_values() {
        let c = container("name: c\nresources: {limits: {cpu: 500m, memory: 64Mi, hugepages-2Mi: 4Mi}, requests: {cpu: 250m}}");
        let v = serde_json::to_value(run(&c, &PodSpec::default(), false).unwrap()).unwrap();
        let r = &v["linux"]["resources"];
        assert_eq!(r["cpu"]["quota"], 50_000);
        assert_eq!(r["cpu"]["period"], 100_000);
        assert_eq!(r["cpu"]["shares"], 256);
        assert_eq!(r["memory"]["limit"], 64 << 20);
        assert_eq!(r["hugepageLimits"][0]["pageSize"], "2MB");
        assert_eq!(r["hugepageLimits"][0]["limit"], 4 << 20);
        let c = container("name: c\nresources: {limits: {cpu: 1m}}");
        let v = serde_json::to_value(run(&c, &PodSpec::default(), false).unwrap()).unwrap();
        assert_eq!(
            v["linux"]["resources"]["cpu"]["quota"], 1000,
            "minimum quota"
        );
        assert_eq!(
            v["linux"]["resources"]["cpu"]["shares"], 2,
            "minimum shares"
        );
    }

    #[test]
    fn mounts_and_namespaces() {
        let c = container("name: c\nvolumeMounts: [{name: data, mountPath: /data, readOnly: true}]\nterminationMessagePath: /dev/termination-log");
        let s = run(&c, &PodSpec::default(), false).unwrap();
        let v = serde_json::to_value(&s).unwrap();
        let m = v["mounts"].as_array().unwrap();
        assert_eq!(m.len(), 3, "the volume replaced the bundle's /data: {m:?}");
        assert_eq!(m[1]["source"], "/host/data");
        assert!(m[1]["options"].as_array().unwrap().contains(&json!("ro")));
        assert_eq!(m[2]["destination"], "/dev/termination-log");
        assert_eq!(m[2]["source"], "/state/tl");
        let types: Vec<LinuxNamespaceType> = s
            .linux()
            .as_ref()
            .unwrap()
            .namespaces()
            .clone()
            .unwrap()
            .iter()
            .map(|n| n.typ())
            .collect();
        assert_eq!(types, [LinuxNamespaceType::Pid, LinuxNamespaceType::Mount]);
        assert!(s.hostname().is_none());
        assert!(s.linux().as_ref().unwrap().cgroups_path().is_none());
        assert_eq!(
            s.root().as_ref().unwrap().path(),
            &PathBuf::from("/b/rootfs")
        );
        let s = run(&container("name: c"), &PodSpec::default(), true).unwrap();
        let types: Vec<LinuxNamespaceType> = s
            .linux()
            .as_ref()
            .unwrap()
            .namespaces()
            .clone()
            .unwrap()
            .iter()
            .map(|n| n.typ())
            .collect();
        assert_eq!(types, [LinuxNamespaceType::Mount], "shared pid namespace");
        let c = container("name: c\nvolumeMounts: [{name: data, mountPath: /d, subPath: ../x}]");
        assert!(run(&c, &PodSpec::default(), false)
            .unwrap_err()
            .contains("subPath"));
    }

    #[test]
    fn expansion_rules() {
        let mut vars = BTreeMap::new();
        vars.insert("A".to_string(), "1".to_string());
        assert_eq!(expand("$(A)$(B)$$(A)$", &vars), "1$(B)$(A)$");
        assert_eq!(expand("é$(A", &vars), "é$(A");
    }

    #[test]
    fn seccomp_profile_choice() {
        let root =
            std::env::temp_dir().join(format!("podinit-scroot-{}", crate::util::random_hex(4)));
        std::fs::create_dir_all(root.join("profiles")).unwrap();
        std::fs::write(
            root.join("profiles/deny-mkdir.json"),
            r#"{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["mkdir"], "action": "SCMP_ACT_ERRNO", "errnoRet": 13}]}"#,
        )
        .unwrap();
        std::fs::write(root.join("bad.json"), "{").unwrap();
        std::fs::write(
            root.join("notify.json"),
            r#"{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["mkdir"], "action": "SCMP_ACT_NOTIFY"}]}"#,
        )
        .unwrap();
        let pod = |sp: &str| -> PodSpec {
            serde_yaml_ng::from_str(&format!(
                "containers: []\nsecurityContext: {{seccompProfile: {sp}}}"
            ))
            .unwrap()
        };
        let seccomp = |c: &str, p: &PodSpec| {
            let s = run_in(&container(c), p, false, &root).unwrap();
            serde_json::to_value(&s).unwrap()["linux"]["seccomp"].clone()
        };
        let allowed = |v: &Value, name: &str| {
            v["syscalls"].as_array().unwrap().iter().any(|r| {
                r["action"] == "SCMP_ACT_ALLOW"
                    && r.get("args").is_none()
                    && r["names"].as_array().unwrap().contains(&json!(name))
            })
        };
        // Unset: Unconfined, the bundle's own filter is dropped too.
        assert_eq!(seccomp("name: c", &PodSpec::default()), Value::Null);
        let d = seccomp(
            "name: c\nsecurityContext: {seccompProfile: {type: RuntimeDefault}}",
            &PodSpec::default(),
        );
        assert_eq!(d["defaultAction"], "SCMP_ACT_ERRNO");
        assert!(allowed(&d, "read") && !allowed(&d, "unshare") && !allowed(&d, "mount"));
        // The profile follows the final bounding set.
        let d = seccomp(
            "name: c\nsecurityContext: {seccompProfile: {type: RuntimeDefault}, capabilities: {add: [SYS_ADMIN]}}",
            &PodSpec::default(),
        );
        assert!(allowed(&d, "unshare") && allowed(&d, "mount"));
        // The pod's applies unless the container has its own.
        let rd = pod("{type: RuntimeDefault}");
        assert_eq!(seccomp("name: c", &rd)["defaultAction"], "SCMP_ACT_ERRNO");
        assert_eq!(
            seccomp(
                "name: c\nsecurityContext: {seccompProfile: {type: Unconfined}}",
                &rd
            ),
            Value::Null
        );
        let lh = pod("{type: Localhost, localhostProfile: profiles/deny-mkdir.json}");
        let l = seccomp("name: c", &lh);
        assert_eq!(l["defaultAction"], "SCMP_ACT_ALLOW");
        assert_eq!(l["syscalls"][0]["errnoRet"], 13);
        // Privileged: no filter, whatever was asked (containerd).
        assert_eq!(
            seccomp("name: c\nsecurityContext: {privileged: true}", &rd),
            Value::Null
        );
        // Localhost files are read at each start; what is wrong with one names it.
        let err = |c: &str| run_in(&container(c), &PodSpec::default(), false, &root).unwrap_err();
        let e = err("name: c\nsecurityContext: {seccompProfile: {type: Localhost, localhostProfile: missing.json}}");
        assert!(
            e.starts_with(&format!(
                "container c: cannot load seccomp profile \"{}/missing.json\": No such file",
                root.display()
            )),
            "{e}"
        );
        let e = err("name: c\nsecurityContext: {seccompProfile: {type: Localhost, localhostProfile: bad.json}}");
        assert!(
            e.starts_with("container c: decoding seccomp profile failed"),
            "{e}"
        );
        let e = err("name: c\nsecurityContext: {seccompProfile: {type: Localhost, localhostProfile: notify.json}}");
        assert!(
            e.ends_with(
                "notify.json\": linux.seccomp.syscalls[0].action: SCMP_ACT_NOTIFY is not supported"
            ),
            "{e}"
        );
        std::fs::remove_dir_all(&root).unwrap();
    }
}
