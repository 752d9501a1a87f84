//! A container's environment as kubelet makes it (`makeEnvironmentVariables`): `envFrom`
//! sources in order (with `prefix`; keys that are not valid names are skipped and
//! reported), then `env` in order, each value expanded (`$(VAR)`) against what came
//! before; `valueFrom` from the pod's ConfigMaps and Secrets, the downward API
//! (`fieldRef`, `resourceFieldRef`). A missing object or key that is not `optional` is a
//! [`ConfigError`]: the container waits in `CreateContainerConfigError` with Kubernetes'
//! message. Pure.

use k8s_openapi::api::core::v1::{ConfigMap, Container, EnvVarSource, Pod, Secret};
use std::collections::BTreeMap;

/// What the values come from.
pub struct Sources<'a> {
    pub pod: &'a Pod,
    pub config_maps: &'a [ConfigMap],
    pub secrets: &'a [Secret],
    /// The pod's addresses (`status.podIP(s)`) and the host's (`status.hostIP(s)`).
    pub pod_ips: &'a [String],
    pub host_ips: &'a [String],
    /// Node allocatable, for `resourceFieldRef` of a resource without a limit.
    pub node_cpu_milli: i64,
    pub node_memory: i64,
    /// The text of an env file (`fileKeyRef`): volume name and path in it → `None` when
    /// there is no such file.
    pub env_file: &'a EnvFileReader<'a>,
}

/// Reads `fileKeyRef` files: (volume, path) → the file's text, `None` if it is missing;
/// a file that cannot be read is the container's configuration error.
pub type EnvFileReader<'a> = dyn Fn(&str, &str) -> Result<Option<String>, ConfigError> + 'a;

/// An [`EnvFileReader`] for sources without env files: every file is missing.
pub fn no_env_files(_volume: &str, _path: &str) -> Result<Option<String>, ConfigError> {
    Ok(None)
}

/// Why a container's configuration cannot be made: kubelet's message, which its waiting
/// state `CreateContainerConfigError` carries.
#[derive(Debug, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The resolved environment, in order, and warnings (skipped `envFrom` keys) for events.
pub struct Resolved {
    pub env: Vec<(String, String)>,
    pub warnings: Vec<String>,
}

fn valid_name(k: &str) -> bool {
    !k.is_empty() && !k.contains('=') && k.bytes().all(|b| (0x20..0x7f).contains(&b))
}

pub fn resolve(c: &Container, s: &Sources) -> Result<Resolved, ConfigError> {
    let ns = s.pod.metadata.namespace.as_deref().unwrap_or("default");
    let mut env: Vec<(String, String)> = Vec::new();
    let mut warnings = Vec::new();
    let set = |env: &mut Vec<(String, String)>, k: String, v: String| match env
        .iter_mut()
        .find(|(n, _)| *n == k)
    {
        Some(e) => e.1 = v,
        None => env.push((k, v)),
    };
    for from in c.env_from.iter().flatten() {
        let prefix = from.prefix.clone().unwrap_or_default();
        let (kind, name, optional) = if let Some(r) = &from.config_map_ref {
            (ObjectKind::ConfigMap, &r.name, r.optional == Some(true))
        } else if let Some(r) = &from.secret_ref {
            (ObjectKind::Secret, &r.name, r.optional == Some(true))
        } else {
            continue;
        };
        let data = match env_data(s, kind, name) {
            Some(d) => text(d),
            None if optional => continue,
            None => return Err(ConfigError(format!("{} {name:?} not found", kind.lower()))),
        };
        let kind = match kind {
            ObjectKind::ConfigMap => "configMap",
            ObjectKind::Secret => "secret",
        };
        let mut invalid = Vec::new();
        for (k, v) in data {
            let key = format!("{prefix}{k}");
            if valid_name(&key) {
                set(&mut env, key, v);
            } else {
                invalid.push(key);
            }
        }
        if !invalid.is_empty() {
            warnings.push(format!(
                "Keys [{}] from the EnvFrom {kind} {ns}/{name} were skipped since they are considered invalid environment variable names.",
                invalid.join(", ")
            ));
        }
    }
    for e in c.env.iter().flatten() {
        let value = match &e.value_from {
            None => {
                let vars: BTreeMap<String, String> = env.iter().cloned().collect();
                crate::pod::expansion::expand(e.value.as_deref().unwrap_or(""), &vars)
            }
            Some(src) => match value_from(src, c, s, ns)? {
                Some(v) => v,
                None => continue, // optional and absent
            },
        };
        set(&mut env, e.name.clone(), value);
    }
    Ok(Resolved { env, warnings })
}

/// A ConfigMap's or a Secret's data by name (ConfigMap `binaryData` included), or `None`
/// when the pod's manifest has no such object.
pub fn object_data(s: &Sources, kind: ObjectKind, name: &str) -> Option<BTreeMap<String, Vec<u8>>> {
    let named = |m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        m.name.as_deref() == Some(name)
    };
    match kind {
        ObjectKind::ConfigMap => s.config_maps.iter().find(|m| named(&m.metadata)).map(|cm| {
            let mut d: BTreeMap<String, Vec<u8>> = cm
                .data
                .iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v.clone().into_bytes()))
                .collect();
            for (k, v) in cm.binary_data.iter().flatten() {
                d.insert(k.clone(), v.0.clone());
            }
            d
        }),
        ObjectKind::Secret => s.secrets.iter().find(|m| named(&m.metadata)).map(|sec| {
            sec.data
                .iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v.0.clone()))
                .collect()
        }),
    }
}

/// [`object_data`] for the environment: kubelet reads a ConfigMap's `data` only, never its
/// `binaryData`, into variables.
fn env_data(s: &Sources, kind: ObjectKind, name: &str) -> Option<BTreeMap<String, Vec<u8>>> {
    match kind {
        ObjectKind::ConfigMap => s
            .config_maps
            .iter()
            .find(|m| m.metadata.name.as_deref() == Some(name))
            .map(|cm| {
                cm.data
                    .iter()
                    .flatten()
                    .map(|(k, v)| (k.clone(), v.clone().into_bytes()))
                    .collect()
            }),
        ObjectKind::Secret => object_data(s, kind, name),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObjectKind {
    ConfigMap,
    Secret,
}

impl ObjectKind {
    /// As kubelet's "not found" errors name it.
    pub fn lower(self) -> &'static str {
        match self {
            ObjectKind::ConfigMap => "configmap",
            ObjectKind::Secret => "secret",
        }
    }
    fn title(self) -> &'static str {
        match self {
            ObjectKind::ConfigMap => "ConfigMap",
            ObjectKind::Secret => "Secret",
        }
    }
}

fn text(d: BTreeMap<String, Vec<u8>>) -> BTreeMap<String, String> {
    d.into_iter()
        .map(|(k, v)| (k, String::from_utf8_lossy(&v).into_owned()))
        .collect()
}

/// `configMapKeyRef` / `secretKeyRef`.
fn key_ref(
    s: &Sources,
    kind: ObjectKind,
    name: &str,
    key: &str,
    optional: bool,
    ns: &str,
) -> Result<Option<String>, ConfigError> {
    let Some(data) = env_data(s, kind, name) else {
        return if optional {
            Ok(None)
        } else {
            Err(ConfigError(format!("{} {name:?} not found", kind.lower())))
        };
    };
    match text(data).remove(key) {
        Some(v) => Ok(Some(v)),
        None if optional => Ok(None),
        None => Err(ConfigError(format!(
            "couldn't find key {key} in {} {ns}/{name}",
            kind.title()
        ))),
    }
}

fn value_from(
    src: &EnvVarSource,
    c: &Container,
    s: &Sources,
    ns: &str,
) -> Result<Option<String>, ConfigError> {
    if let Some(r) = &src.config_map_key_ref {
        let optional = r.optional == Some(true);
        return key_ref(s, ObjectKind::ConfigMap, &r.name, &r.key, optional, ns);
    }
    if let Some(r) = &src.secret_key_ref {
        let optional = r.optional == Some(true);
        return key_ref(s, ObjectKind::Secret, &r.name, &r.key, optional, ns);
    }
    if let Some(f) = &src.field_ref {
        return field(&f.field_path, s)
            .map(Some)
            .ok_or_else(|| ConfigError(format!("unsupported fieldPath: {}", f.field_path)));
    }
    if let Some(r) = &src.resource_field_ref {
        return resource(r, c, s).map(Some);
    }
    if let Some(f) = &src.file_key_ref {
        return file_key_ref(f, s);
    }
    Ok(None)
}

/// `fileKeyRef`: the key of an env file in an emptyDir, read at each start; a missing file
/// or key is an error unless `optional`, a file kubelet cannot parse always is.
fn file_key_ref(
    f: &k8s_openapi::api::core::v1::FileKeySelector,
    s: &Sources,
) -> Result<Option<String>, ConfigError> {
    let optional = f.optional == Some(true);
    let (vol, path, key) = (&f.volume_name, &f.path, &f.key);
    let text = match (s.env_file)(vol, path)? {
        Some(t) => t,
        None if optional => return Ok(None),
        None => {
            return Err(ConfigError(format!(
                "couldn't find env file {path:?} in volume {vol:?}"
            )))
        }
    };
    match super::env_file::lookup(&text, key) {
        Ok(Some(v)) => Ok(Some(v)),
        Ok(None) if optional => Ok(None),
        Ok(None) => Err(ConfigError(format!(
            "couldn't find key {key} in env file {path:?} of volume {vol:?}"
        ))),
        Err(e) => Err(ConfigError(format!(
            "env file {path:?} of volume {vol:?}: {e}"
        ))),
    }
}

/// A downward-API field (the paths `validateEnvVarValueFrom` accepts).
pub fn field(path: &str, s: &Sources) -> Option<String> {
    let m = &s.pod.metadata;
    let spec = s.pod.spec.as_ref();
    let keyed = |prefix: &str, map: &Option<BTreeMap<String, String>>| {
        let key = path.strip_prefix(prefix)?.strip_suffix("']")?;
        Some(
            map.as_ref()
                .and_then(|m| m.get(key))
                .cloned()
                .unwrap_or_default(),
        )
    };
    Some(match path {
        "metadata.name" => m.name.clone().unwrap_or_default(),
        "metadata.namespace" => m.namespace.clone().unwrap_or_else(|| "default".into()),
        "metadata.uid" => m.uid.clone().unwrap_or_default(),
        "spec.nodeName" => spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
        "spec.serviceAccountName" => spec
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_default(),
        "status.podIP" => s.pod_ips.first().cloned().unwrap_or_default(),
        "status.podIPs" => s.pod_ips.join(","),
        "status.hostIP" => s.host_ips.first().cloned().unwrap_or_default(),
        "status.hostIPs" => s.host_ips.join(","),
        p if p.starts_with("metadata.labels['") => keyed("metadata.labels['", &m.labels)?,
        p if p.starts_with("metadata.annotations['") => {
            keyed("metadata.annotations['", &m.annotations)?
        }
        _ => return None,
    })
}

/// `resourceFieldRef`: the container's limit or request in units of `divisor`, rounded
/// up; a limit that is not set is the pod-level limit, or else the node's allocatable.
fn resource(
    r: &k8s_openapi::api::core::v1::ResourceFieldSelector,
    c: &Container,
    s: &Sources,
) -> Result<String, ConfigError> {
    use crate::quantity;
    let target = match r.container_name.as_deref() {
        Some(n) if !n.is_empty() && n != c.name => {
            let spec = s.pod.spec.as_ref();
            spec.into_iter()
                .flat_map(|sp| sp.init_containers.iter().flatten().chain(&sp.containers))
                .find(|x| x.name == n)
                .ok_or_else(|| ConfigError(format!("container {n:?} not found in the pod")))?
        }
        _ => c,
    };
    let (kind, name) = r
        .resource
        .split_once('.')
        .ok_or_else(|| ConfigError(format!("unsupported container resource: {:?}", r.resource)))?;
    let res = target.resources.clone().unwrap_or_default();
    let map = if kind == "limits" {
        &res.limits
    } else {
        &res.requests
    };
    // A limit the container does not set is the pod-level one when the pod has it
    // (KEP-2837), before the node's allocatable.
    let pod_limit = || {
        let pod_level = s.pod.spec.as_ref()?.resources.as_ref()?.limits.as_ref()?;
        pod_level.get(name)
    };
    let set = map
        .as_ref()
        .and_then(|m| m.get(name))
        .or_else(|| (kind == "limits").then(pod_limit).flatten())
        .and_then(|q| quantity::parse(&q.0).ok());
    let divisor = r
        .divisor
        .as_ref()
        .and_then(|q| quantity::parse(&q.0).ok())
        .filter(|d| !d.is_zero());
    let bad = || ConfigError(format!("unsupported container resource: {:?}", r.resource));
    match name {
        "cpu" => {
            let milli = match set {
                Some(q) => q.milli(),
                None if kind == "limits" => s.node_cpu_milli as i128,
                None => 0,
            };
            let div = divisor.map(|d| d.milli()).unwrap_or(1000).max(1);
            Ok(((milli + div - 1) / div)
                .max(if kind == "limits" { 1 } else { 0 })
                .to_string())
        }
        "memory" | "ephemeral-storage" => {
            let v = match set {
                Some(q) => q.value(),
                None if kind == "limits" && name == "memory" => s.node_memory as i128,
                None => 0,
            };
            let div = divisor.map(|d| d.value()).unwrap_or(1).max(1);
            Ok(((v + div - 1) / div).to_string())
        }
        n if n.starts_with("hugepages-") => {
            let v = set.map(|q| q.value()).unwrap_or(0);
            let div = divisor.map(|d| d.value()).unwrap_or(1).max(1);
            Ok(((v + div - 1) / div).to_string())
        }
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod() -> Pod {
        serde_yaml_ng::from_str(
            "metadata: {name: web, namespace: prod, uid: u1, labels: {app: shop}, annotations: {a/b: c}}\nspec:\n  nodeName: n1\n  containers:\n  - {name: c, resources: {limits: {cpu: 1500m, memory: 64Mi}}}",
        )
        .unwrap()
    }

    fn cms() -> Vec<ConfigMap> {
        vec![serde_yaml_ng::from_str(
            "metadata: {name: cfg}\ndata: {MODE: fast, LEVEL: '3', bad-key: x, 'with=eq': y}\nbinaryData: {BLOB: AAE=}",
        )
        .unwrap()]
    }

    fn secrets() -> Vec<Secret> {
        vec![
            serde_yaml_ng::from_str("metadata: {name: creds}\ndata: {PASSWORD: aHVudGVyMg==}")
                .unwrap(),
        ]
    }

    fn run(env_yaml: &str) -> Result<Resolved, ConfigError> {
        let p = pod();
        let c: Container = serde_yaml_ng::from_str(&format!(
            "{{name: c, resources: {{limits: {{cpu: 1500m, memory: 64Mi}}}}, {env_yaml}}}"
        ))
        .unwrap();
        let (cms, secrets) = (cms(), secrets());
        let s = Sources {
            pod: &p,
            config_maps: &cms,
            secrets: &secrets,
            pod_ips: &["10.0.0.5".into()],
            host_ips: &["192.168.1.2".into()],
            node_cpu_milli: 2000,
            node_memory: 1 << 30,
            env_file: &no_env_files,
        };
        resolve(&c, &s)
    }

    fn get(r: &Resolved, k: &str) -> String {
        r.env
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("{k} missing"))
    }

    #[test]
    fn env_from_then_env_with_expansion_and_overrides() {
        let r = run(
            "envFrom: [{configMapRef: {name: cfg}, prefix: CFG_}, {secretRef: {name: creds}}], env: [{name: MODE, value: '$(CFG_MODE)-x'}, {name: CFG_LEVEL, value: '9'}, {name: ESC, value: '$$(MODE)'}]",
        )
        .unwrap();
        assert_eq!(get(&r, "CFG_MODE"), "fast");
        assert_eq!(get(&r, "PASSWORD"), "hunter2");
        assert_eq!(get(&r, "MODE"), "fast-x");
        assert_eq!(get(&r, "CFG_LEVEL"), "9", "env overrides envFrom");
        assert_eq!(get(&r, "ESC"), "$(MODE)");
        assert_eq!(get(&r, "CFG_bad-key"), "x", "relaxed names: '-' is fine");
        assert!(
            !r.env.iter().any(|(k, _)| k == "CFG_BLOB"),
            "binaryData is not environment"
        );
        assert_eq!(
            r.warnings,
            ["Keys [CFG_with=eq] from the EnvFrom configMap prod/cfg were skipped since they are considered invalid environment variable names."]
        );
    }

    #[test]
    fn key_refs_and_their_errors() {
        let r = run("env: [{name: L, valueFrom: {configMapKeyRef: {name: cfg, key: LEVEL}}}, {name: P, valueFrom: {secretKeyRef: {name: creds, key: PASSWORD}}}, {name: O, valueFrom: {configMapKeyRef: {name: nope, key: k, optional: true}}}]").unwrap();
        assert_eq!((get(&r, "L"), get(&r, "P")), ("3".into(), "hunter2".into()));
        assert!(
            !r.env.iter().any(|(k, _)| k == "O"),
            "optional and absent: unset"
        );
        for (env, want) in [
            (
                "env: [{name: X, valueFrom: {configMapKeyRef: {name: cfg, key: NOPE}}}]",
                "couldn't find key NOPE in ConfigMap prod/cfg",
            ),
            (
                "env: [{name: X, valueFrom: {configMapKeyRef: {name: other, key: K}}}]",
                "configmap \"other\" not found",
            ),
            (
                "env: [{name: X, valueFrom: {secretKeyRef: {name: creds, key: USER}}}]",
                "couldn't find key USER in Secret prod/creds",
            ),
            (
                "envFrom: [{secretRef: {name: gone}}]",
                "secret \"gone\" not found",
            ),
            (
                "env: [{name: X, valueFrom: {configMapKeyRef: {name: cfg, key: BLOB}}}]",
                "couldn't find key BLOB in ConfigMap prod/cfg",
            ),
        ] {
            assert_eq!(run(env).err(), Some(ConfigError(want.into())), "{env}");
        }
    }

    #[test]
    fn a_limit_the_container_lacks_is_the_pod_level_one_then_the_node_s() {
        let mut p = pod();
        let c: Container = serde_yaml_ng::from_str("{name: c, env: [{name: CPU, valueFrom: {resourceFieldRef: {resource: limits.cpu, divisor: 1m}}}, {name: MEM, valueFrom: {resourceFieldRef: {resource: limits.memory, divisor: 1Mi}}}]}").unwrap();
        let resolve_with = |p: &Pod| {
            let s = Sources {
                pod: p,
                config_maps: &[],
                secrets: &[],
                pod_ips: &[],
                host_ips: &[],
                node_cpu_milli: 2000,
                node_memory: 1 << 30,
                env_file: &no_env_files,
            };
            resolve(&c, &s).unwrap()
        };
        let r = resolve_with(&p);
        assert_eq!(
            (get(&r, "CPU"), get(&r, "MEM")),
            ("2000".into(), "1024".into())
        );
        p.spec.as_mut().unwrap().resources =
            Some(serde_yaml_ng::from_str("{limits: {memory: 100Mi}}").unwrap());
        let r = resolve_with(&p);
        assert_eq!(
            (get(&r, "CPU"), get(&r, "MEM")),
            ("2000".into(), "100".into()),
            "the pod limits memory only"
        );
    }

    #[test]
    fn the_downward_api() {
        let r = run("env: [{name: N, valueFrom: {fieldRef: {fieldPath: metadata.name}}}, {name: NS, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}}, {name: L, valueFrom: {fieldRef: {fieldPath: \"metadata.labels['app']\"}}}, {name: A, valueFrom: {fieldRef: {fieldPath: \"metadata.annotations['a/b']\"}}}, {name: IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}, {name: H, valueFrom: {fieldRef: {fieldPath: status.hostIP}}}, {name: NODE, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}, {name: CPU, valueFrom: {resourceFieldRef: {resource: limits.cpu}}}, {name: CPUM, valueFrom: {resourceFieldRef: {resource: limits.cpu, divisor: 1m}}}, {name: MEM, valueFrom: {resourceFieldRef: {resource: limits.memory, divisor: 1Mi}}}, {name: REQ, valueFrom: {resourceFieldRef: {resource: requests.memory}}}]").unwrap();
        for (k, v) in [
            ("N", "web"),
            ("NS", "prod"),
            ("L", "shop"),
            ("A", "c"),
            ("IP", "10.0.0.5"),
            ("H", "192.168.1.2"),
            ("NODE", "n1"),
            ("CPU", "2"),
            ("CPUM", "1500"),
            ("MEM", "64"),
            ("REQ", "0"),
        ] {
            assert_eq!(get(&r, k), v, "{k}");
        }
    }

    fn run_with_file(env_yaml: &str, file: Option<&str>) -> Result<Resolved, ConfigError> {
        let p = pod();
        let c: Container = serde_yaml_ng::from_str(&format!("{{name: c, {env_yaml}}}")).unwrap();
        let reader = |vol: &str, path: &str| {
            assert_eq!((vol, path), ("config", "config.env"));
            Ok(file.map(str::to_string))
        };
        let s = Sources {
            pod: &p,
            config_maps: &[],
            secrets: &[],
            pod_ips: &[],
            host_ips: &[],
            node_cpu_milli: 1000,
            node_memory: 1 << 30,
            env_file: &reader,
        };
        resolve(&c, &s)
    }

    #[test]
    fn file_key_refs_read_the_env_file_at_each_start() {
        let var = |key: &str, optional: bool| {
            format!("env: [{{name: DB_ADDRESS, valueFrom: {{fileKeyRef: {{volumeName: config, path: config.env, key: {key}, optional: {optional}}}}}}}, {{name: URL, value: 'db=$(DB_ADDRESS)'}}]")
        };
        let file = "DB_ADDRESS='address'\nREST_ENDPOINT='endpoint'\n";
        let r = run_with_file(&var("DB_ADDRESS", false), Some(file)).unwrap();
        assert_eq!(get(&r, "DB_ADDRESS"), "address");
        assert_eq!(get(&r, "URL"), "db=address", "later variables expand it");
        assert_eq!(
            run_with_file(&var("NOPE", false), Some(file)).err(),
            Some(ConfigError(
                "couldn't find key NOPE in env file \"config.env\" of volume \"config\"".into()
            ))
        );
        assert_eq!(
            run_with_file(&var("DB_ADDRESS", false), None).err(),
            Some(ConfigError(
                "couldn't find env file \"config.env\" in volume \"config\"".into()
            ))
        );
        // Optional: a missing file or key sets nothing.
        let r = run_with_file(&var("NOPE", true), Some(file)).unwrap();
        assert!(r.env.iter().all(|(k, _)| k != "DB_ADDRESS"));
        let r = run_with_file(&var("DB_ADDRESS", true), None).unwrap();
        assert!(r.env.iter().all(|(k, _)| k != "DB_ADDRESS"));
        // A file kubelet cannot parse is an error even when optional.
        let e = run_with_file(&var("DB_ADDRESS", true), Some("DB_ADDRESS=address\n"))
            .err()
            .unwrap();
        assert_eq!(e.0, "env file \"config.env\" of volume \"config\": invalid environment variable format at line 1: value must be enclosed in single quotes");
    }
}
