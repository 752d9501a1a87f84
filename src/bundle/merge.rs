//! Lay a Kubernetes container over a bundle's `config.json` (the rules are in the module
//! doc of `bundle`). Works on the spec's JSON form, which keeps every field of the bundle
//! that podinit does not touch exactly as written.

use k8s_openapi::api::core::v1::{Container, PodSpec};
use oci_spec::runtime::Spec;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Component, Path};

use super::security::{devices, privileged_spec, security};
use super::{Bundle, MergeContext};
use crate::quantity;

pub(super) const DEFAULT_PATH: &str =
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
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
        (None, Some(a)) => bundle_args
            .iter()
            .take(b.entrypoint_len)
            .cloned()
            .chain(a)
            .collect(),
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
    // `tty: true` is the CRI's `tty`: the runtime gives the process a terminal.
    process["terminal"] = json!(c.tty == Some(true));

    if let Some(e) = b.image.as_ref().and_then(|i| i.user_error.as_ref()) {
        let run_as_user = c.security_context.as_ref().and_then(|s| s.run_as_user);
        let pod_user = pod.security_context.as_ref().and_then(|s| s.run_as_user);
        if run_as_user.or(pod_user).is_none() {
            return Err(who("image", e.clone()));
        }
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
    // `procMount: Unmasked` (admitted with `hostUsers: false` only): /proc as the kernel
    // shows it, as the CRI's unmasked proc mount is.
    let unmasked = c
        .security_context
        .as_ref()
        .and_then(|s| s.proc_mount.as_deref())
        == Some("Unmasked");
    if unmasked {
        if let Some(l) = v.get_mut("linux").and_then(Value::as_object_mut) {
            l.remove("maskedPaths");
            l.remove("readonlyPaths");
        }
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
    crate::tracked::from_value(&v).map_err(|e| who("effective spec", e))
}

/// `v[key]` as an object, created if missing.
pub(super) fn obj<'a>(v: &'a mut Value, key: &str) -> &'a mut Value {
    let o = v.as_object_mut().expect("an object");
    let e = o.entry(key).or_insert_with(|| json!({}));
    if !e.is_object() {
        *e = json!({});
    }
    e
}

pub(super) fn strings(v: &Value) -> Vec<String> {
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

/// Container `c`'s resources as the OCI `linux.resources` its cgroup is given (what an
/// in-place resize writes again).
pub fn container_resources(c: &Container) -> Result<oci_spec::runtime::LinuxResources, String> {
    let mut v = json!({});
    resources(&mut v, c)?;
    serde_json::from_value(v["linux"]["resources"].take()).map_err(|e| e.to_string())
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
            let made = vol
                .made_at
                .as_ref()
                .map_or_else(|| src.clone(), |m| m.join(p));
            if !made.exists() {
                std::fs::create_dir_all(&made)
                    .map_err(|e| format!("{field}.subPath: creating {}: {e}", made.display()))?;
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
mod tests;
