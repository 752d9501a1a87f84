//! The files of `configMap`, `secret`, `downwardAPI` and `projected` volumes, as kubelet
//! writes them: every key (or the listed `items`, at their `path`), with the item's `mode`
//! or the volume's `defaultMode` (0644). An object or key that is missing and not
//! `optional` is an error with kubelet's words. Pure: the sandbox writes the files.

use k8s_openapi::api::core::v1::{
    ConfigMapProjection, DownwardAPIVolumeFile, KeyToPath, SecretProjection, Volume,
};
use std::collections::BTreeMap;

use super::env::{field, object_data, ObjectKind, Sources};

pub use crate::pod::volume_file::File;

const DEFAULT_MODE: u32 = 0o644;

/// Why a volume's files cannot be made, in the words of kubelet's volume plugins.
#[derive(Debug, PartialEq, Eq)]
pub enum Error {
    /// A ConfigMap or Secret not in the pod's manifest, and not `optional`.
    NotFound { kind: ObjectKind, name: String },
    /// A key of `items` that the ConfigMap or Secret does not have.
    MissingKey { kind: ObjectKind, key: String },
    /// A downward-API `fieldPath` podinit does not give.
    FieldPath(String),
    /// The container a `resourceFieldRef` names is not in the pod.
    NoContainer(String),
    /// The resource of a `resourceFieldRef` cannot be resolved.
    Resource(super::env::ConfigError),
    /// A projected source other than configMap, secret and downwardAPI.
    Unsupported,
    /// Several sources of a projected volume failed, each once, in order.
    Several(Vec<Error>),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::NotFound { kind, name } => write!(f, "{} {name:?} not found", kind.lower()),
            Error::MissingKey {
                kind: ObjectKind::ConfigMap,
                key,
            } => write!(f, "configmap references non-existent config key: {key}"),
            Error::MissingKey {
                kind: ObjectKind::Secret,
                key,
            } => write!(f, "references non-existent secret key: {key}"),
            Error::FieldPath(p) => write!(f, "unsupported fieldPath: {p}"),
            Error::NoContainer(name) => write!(f, "container {name} not found"),
            Error::Resource(e) => e.fmt(f),
            Error::Unsupported => {
                f.write_str("projected source not supported (only configMap, secret, downwardAPI)")
            }
            // As Kubernetes' `utilerrors.NewAggregate` prints them.
            Error::Several(errors) => {
                f.write_str("[")?;
                for (i, e) in errors.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    e.fmt(f)?;
                }
                f.write_str("]")
            }
        }
    }
}

impl std::error::Error for Error {}

/// The files of `v`, or `None` when it is not a volume of files.
pub fn of_volume(v: &Volume, s: &Sources) -> Result<Option<Vec<File>>, Error> {
    let mode = |m: Option<i32>| m.map_or(DEFAULT_MODE, |m| m as u32 & 0o777);
    let mut files = Vec::new();
    if let Some(c) = &v.config_map {
        let proj = ConfigMapProjection {
            name: c.name.clone(),
            items: c.items.clone(),
            optional: c.optional,
        };
        config_map(&proj, mode(c.default_mode), s, &mut files)?;
    } else if let Some(c) = &v.secret {
        let proj = SecretProjection {
            name: c.secret_name.clone().unwrap_or_default(),
            items: c.items.clone(),
            optional: c.optional,
        };
        secret(&proj, mode(c.default_mode), s, &mut files)?;
    } else if let Some(d) = &v.downward_api {
        downward(
            d.items.as_deref().unwrap_or_default(),
            mode(d.default_mode),
            s,
            &mut files,
        )?;
    } else if let Some(p) = &v.projected {
        let m = mode(p.default_mode);
        // As kubelet's projected volume: every source is tried, and the errors are
        // reported together.
        let mut errors = Vec::new();
        for src in p.sources.iter().flatten() {
            let r = if let Some(c) = &src.config_map {
                config_map(c, m, s, &mut files)
            } else if let Some(c) = &src.secret {
                secret(c, m, s, &mut files)
            } else if let Some(d) = &src.downward_api {
                downward(d.items.as_deref().unwrap_or_default(), m, s, &mut files)
            } else {
                // Admission refuses the others (`manifest::strict`).
                Err(Error::Unsupported)
            };
            if let Err(e) = r {
                errors.push(e);
            }
        }
        if !errors.is_empty() {
            return Err(aggregate(errors));
        }
    } else {
        return Ok(None);
    }
    Ok(Some(files))
}

/// Several errors as one, as Kubernetes' `utilerrors.NewAggregate` makes them: one alone
/// as it is, more with repeats dropped.
fn aggregate(errors: Vec<Error>) -> Error {
    let mut once: Vec<Error> = Vec::new();
    for e in errors {
        if !once.contains(&e) {
            once.push(e);
        }
    }
    if once.len() == 1 {
        return once.remove(0);
    }
    Error::Several(once)
}

/// Keys (or `items`) of one object's data.
fn keys(
    data: BTreeMap<String, Vec<u8>>,
    items: &Option<Vec<KeyToPath>>,
    optional: bool,
    mode: u32,
    kind: ObjectKind,
    out: &mut Vec<File>,
) -> Result<(), Error> {
    match items {
        None => {
            for (k, d) in data {
                out.push(File {
                    path: k,
                    data: d,
                    mode,
                });
            }
        }
        Some(items) => {
            for it in items {
                match data.get(&it.key) {
                    Some(d) => out.push(File {
                        path: it.path.clone(),
                        data: d.clone(),
                        mode: it.mode.map_or(mode, |m| m as u32 & 0o777),
                    }),
                    None if optional => {}
                    None => {
                        return Err(Error::MissingKey {
                            kind,
                            key: it.key.clone(),
                        })
                    }
                }
            }
        }
    }
    Ok(())
}

/// The files of one ConfigMap or Secret source.
fn object(
    kind: ObjectKind,
    name: &str,
    items: &Option<Vec<KeyToPath>>,
    optional: Option<bool>,
    mode: u32,
    s: &Sources,
    out: &mut Vec<File>,
) -> Result<(), Error> {
    let optional = optional == Some(true);
    let Some(data) = object_data(s, kind, name) else {
        return if optional {
            Ok(())
        } else {
            Err(Error::NotFound {
                kind,
                name: name.to_string(),
            })
        };
    };
    keys(data, items, optional, mode, kind, out)
}

fn config_map(
    c: &ConfigMapProjection,
    mode: u32,
    s: &Sources,
    out: &mut Vec<File>,
) -> Result<(), Error> {
    object(
        ObjectKind::ConfigMap,
        &c.name,
        &c.items,
        c.optional,
        mode,
        s,
        out,
    )
}

fn secret(c: &SecretProjection, mode: u32, s: &Sources, out: &mut Vec<File>) -> Result<(), Error> {
    object(
        ObjectKind::Secret,
        &c.name,
        &c.items,
        c.optional,
        mode,
        s,
        out,
    )
}

/// `metadata.labels` and `metadata.annotations` as whole files: `key="value"` lines, sorted.
fn map_file(m: &Option<BTreeMap<String, String>>) -> String {
    m.iter()
        .flatten()
        .map(|(k, v)| format!("{k}={v:?}\n"))
        .collect::<String>()
        .trim_end()
        .to_string()
}

fn downward(
    items: &[DownwardAPIVolumeFile],
    mode: u32,
    s: &Sources,
    out: &mut Vec<File>,
) -> Result<(), Error> {
    for it in items {
        let data = if let Some(f) = &it.field_ref {
            match f.field_path.as_str() {
                "metadata.labels" => map_file(&s.pod.metadata.labels),
                "metadata.annotations" => map_file(&s.pod.metadata.annotations),
                p => field(p, s).ok_or_else(|| Error::FieldPath(p.to_string()))?,
            }
        } else if let Some(r) = &it.resource_field_ref {
            let spec = s.pod.spec.as_ref();
            let name = r.container_name.as_deref().unwrap_or("");
            let c = spec
                .into_iter()
                .flat_map(|sp| sp.init_containers.iter().flatten().chain(&sp.containers))
                .find(|c| c.name == name)
                .ok_or_else(|| Error::NoContainer(name.to_string()))?;
            let src = k8s_openapi::api::core::v1::EnvVarSource {
                resource_field_ref: Some(r.clone()),
                ..Default::default()
            };
            let var = k8s_openapi::api::core::v1::EnvVar {
                name: "V".into(),
                value_from: Some(src),
                ..Default::default()
            };
            let probe = k8s_openapi::api::core::v1::Container {
                env: Some(vec![var]),
                ..c.clone()
            };
            let r = super::env::resolve(&probe, s).map_err(Error::Resource)?;
            r.env
                .into_iter()
                .find(|(k, _)| k == "V")
                .map(|(_, v)| v)
                .unwrap_or_default()
        } else {
            continue;
        };
        out.push(File {
            path: it.path.clone(),
            data: data.into_bytes(),
            mode: it.mode.map_or(mode, |m| m as u32 & 0o777),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};

    fn with(v: &str, f: impl FnOnce(Result<Option<Vec<File>>, Error>)) {
        let pod: Pod = serde_yaml_ng::from_str(
            "metadata: {name: web, labels: {b: '2', a: '1'}}\nspec:\n  containers:\n  - {name: c, resources: {limits: {memory: 32Mi}}}",
        )
        .unwrap();
        let cms: Vec<ConfigMap> =
            vec![
                serde_yaml_ng::from_str("metadata: {name: cfg}\ndata: {a.conf: x, b.conf: y}")
                    .unwrap(),
            ];
        let secrets: Vec<Secret> =
            vec![serde_yaml_ng::from_str("metadata: {name: s}\ndata: {token: c2VjcmV0}").unwrap()];
        let s = Sources {
            pod: &pod,
            config_maps: &cms,
            secrets: &secrets,
            pod_ips: &[],
            host_ips: &[],
            node_cpu_milli: 1000,
            node_memory: 1 << 30,
            env_file: &crate::manifest::env::no_env_files,
        };
        let v: Volume = serde_yaml_ng::from_str(v).unwrap();
        f(of_volume(&v, &s));
    }

    fn file(path: &str, data: &str, mode: u32) -> File {
        File {
            path: path.into(),
            data: data.as_bytes().to_vec(),
            mode,
        }
    }

    #[test]
    fn config_maps_and_secrets_become_files() {
        with("{name: v, configMap: {name: cfg}}", |r| {
            assert_eq!(
                r.unwrap().unwrap(),
                vec![file("a.conf", "x", 0o644), file("b.conf", "y", 0o644)]
            )
        });
        with("{name: v, configMap: {name: cfg, defaultMode: 384, items: [{key: b.conf, path: dir/b}, {key: a.conf, path: a, mode: 256}]}}", |r| {
            assert_eq!(r.unwrap().unwrap(), vec![file("dir/b", "y", 0o600), file("a", "x", 0o400)])
        });
        with("{name: v, secret: {secretName: s}}", |r| {
            assert_eq!(r.unwrap().unwrap(), vec![file("token", "secret", 0o644)])
        });
        with("{name: v, configMap: {name: nope}}", |r| {
            assert_eq!(r.unwrap_err().to_string(), "configmap \"nope\" not found")
        });
        with("{name: v, configMap: {name: nope, optional: true}}", |r| {
            assert_eq!(r.unwrap().unwrap(), vec![])
        });
        with(
            "{name: v, configMap: {name: cfg, items: [{key: c.conf, path: c}]}}",
            |r| {
                assert_eq!(
                    r.unwrap_err().to_string(),
                    "configmap references non-existent config key: c.conf"
                )
            },
        );
        with("{name: v, emptyDir: {}}", |r| assert_eq!(r.unwrap(), None));
    }

    #[test]
    fn downward_api_and_projected() {
        with("{name: v, downwardAPI: {items: [{path: name, fieldRef: {fieldPath: metadata.name}}, {path: labels, fieldRef: {fieldPath: metadata.labels}}, {path: mem, resourceFieldRef: {containerName: c, resource: limits.memory, divisor: 1Mi}}]}}", |r| {
            assert_eq!(
                r.unwrap().unwrap(),
                vec![file("name", "web", 0o644), file("labels", "a=\"1\"\nb=\"2\"", 0o644), file("mem", "32", 0o644)]
            )
        });
        with("{name: v, projected: {defaultMode: 288, sources: [{configMap: {name: cfg, items: [{key: a.conf, path: a}]}}, {secret: {name: s}}]}}", |r| {
            assert_eq!(r.unwrap().unwrap(), vec![file("a", "x", 0o440), file("token", "secret", 0o440)])
        });
        // Every source is tried; the errors come together, as kubelet's aggregate.
        with("{name: v, projected: {sources: [{secret: {name: mysecret}}, {configMap: {name: cfg}}, {configMap: {name: myconfigmap}}]}}", |r| {
            assert_eq!(r.unwrap_err().to_string(), "[secret \"mysecret\" not found, configmap \"myconfigmap\" not found]")
        });
        with(
            "{name: v, projected: {sources: [{secret: {name: mysecret}}]}}",
            |r| assert_eq!(r.unwrap_err().to_string(), "secret \"mysecret\" not found"),
        );
        with(
            "{name: v, projected: {sources: [{secret: {name: mysecret, optional: true}}]}}",
            |r| assert_eq!(r.unwrap().unwrap(), vec![]),
        );
    }
}
