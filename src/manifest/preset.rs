//! PodPresets (`settings.k8s.io/v1alpha1`), applied at admission as the PodPreset plugin
//! did (docs/semantics.md §PodPreset): every preset of the pod's namespace whose selector
//! matches the pod's labels merges `env`, `envFrom` and `volumeMounts` into each app
//! container and `volumes` into the pod; a conflict with the pod or between presets (same
//! env name, mount name or path, volume name with another value) applies none, and says
//! why; `podpreset.admission.kubernetes.io/exclude: "true"` opts out. Pure.

use k8s_openapi::api::core::v1::{EnvFromSource, EnvVar, Pod, Volume, VolumeMount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use serde::Deserialize;
use std::collections::BTreeMap;

use super::Error;

pub const API_VERSION: &str = "settings.k8s.io/v1alpha1";
const EXCLUDE: &str = "podpreset.admission.kubernetes.io/exclude";
const APPLIED_PREFIX: &str = "podpreset.admission.kubernetes.io/podpreset-";

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodPreset {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: PodPresetSpec,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodPresetSpec {
    pub selector: Option<LabelSelector>,
    pub env: Option<Vec<EnvVar>>,
    pub env_from: Option<Vec<EnvFromSource>>,
    pub volumes: Option<Vec<Volume>>,
    pub volume_mounts: Option<Vec<VolumeMount>>,
}

/// Whether `sel` matches `labels` (`metav1.LabelSelectorAsSelector`: no selector matches
/// nothing, an empty one everything). An unknown operator is an error of `spec.selector`.
pub fn matches(
    sel: Option<&LabelSelector>,
    labels: &BTreeMap<String, String>,
) -> Result<bool, Error> {
    let Some(sel) = sel else { return Ok(false) };
    for (k, v) in sel.match_labels.iter().flatten() {
        if labels.get(k) != Some(v) {
            return Ok(false);
        }
    }
    for e in sel.match_expressions.iter().flatten() {
        let vals = e.values.clone().unwrap_or_default();
        let have = labels.get(&e.key);
        let ok = match e.operator.as_str() {
            "In" => have.is_some_and(|h| vals.contains(h)),
            "NotIn" => have.is_none_or(|h| !vals.contains(h)),
            "Exists" => have.is_some(),
            "DoesNotExist" => have.is_none(),
            op => {
                return Err(Error::new(
                    "spec.selector",
                    format!("{op:?} is not a valid label selector operator"),
                ))
            }
        };
        if !ok {
            return Ok(false);
        }
    }
    Ok(true)
}

/// What admission did with the presets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Names of the presets applied.
    pub applied: Vec<String>,
    /// A conflict that stopped every preset (for a Warning event).
    pub conflict: Option<String>,
}

/// Apply the matching presets to `pod` (already defaulted, not yet validated).
pub fn apply(pod: &mut Pod, presets: &[PodPreset]) -> Result<Outcome, Error> {
    let ns = pod
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    if pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(EXCLUDE))
        .is_some_and(|v| v == "true")
    {
        return Ok(Outcome::default());
    }
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    let mut matching = Vec::new();
    for p in presets {
        let pns = p.metadata.namespace.as_deref().unwrap_or("default");
        if pns != ns {
            continue;
        }
        let name = p.metadata.name.clone().unwrap_or_default();
        if matches(p.spec.selector.as_ref(), &labels)
            .map_err(|e| Error::new("PodPreset", format!("PodPreset {name:?}: {e}")))?
        {
            matching.push(p);
        }
    }
    if matching.is_empty() {
        return Ok(Outcome::default());
    }
    let names: Vec<String> = matching
        .iter()
        .map(|p| p.metadata.name.clone().unwrap_or_default())
        .collect();
    if let Err(e) = check(pod, &matching) {
        return Ok(Outcome {
            applied: Vec::new(),
            conflict: Some(format!(
                "conflict occurred while applying podpresets: {} on pod: {}: {e}",
                names.join(","),
                pod.metadata.name.as_deref().unwrap_or_default()
            )),
        });
    }
    let spec = pod.spec.get_or_insert_with(Default::default);
    for p in &matching {
        for v in p.spec.volumes.iter().flatten() {
            let vols = spec.volumes.get_or_insert_with(Vec::new);
            if !vols.iter().any(|x| x.name == v.name) {
                vols.push(v.clone());
            }
        }
        for c in spec.containers.iter_mut() {
            for e in p.spec.env.iter().flatten() {
                let env = c.env.get_or_insert_with(Vec::new);
                if !env.iter().any(|x| x.name == e.name) {
                    env.push(e.clone());
                }
            }
            for f in p.spec.env_from.iter().flatten() {
                c.env_from.get_or_insert_with(Vec::new).push(f.clone());
            }
            for m in p.spec.volume_mounts.iter().flatten() {
                let mounts = c.volume_mounts.get_or_insert_with(Vec::new);
                if !mounts
                    .iter()
                    .any(|x| x.name == m.name && x.mount_path == m.mount_path)
                {
                    mounts.push(m.clone());
                }
            }
        }
        let ann = pod.metadata.annotations.get_or_insert_with(BTreeMap::new);
        ann.insert(
            format!(
                "{APPLIED_PREFIX}{}",
                p.metadata.name.as_deref().unwrap_or_default()
            ),
            p.metadata.resource_version.clone().unwrap_or_default(),
        );
    }
    Ok(Outcome {
        applied: names,
        conflict: None,
    })
}

/// A preset that conflicts with the pod or with a preset before it: its name, and what.
struct Conflict {
    preset: String,
    what: String,
}

impl std::fmt::Display for Conflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PodPreset {:?}: {}", self.preset, self.what)
    }
}

/// An entry of a named list (`volumes`, `env`) that `preset` adds, against those already
/// there with where each came from: the same name with another value is a conflict.
fn add_named<T: PartialEq + Clone>(
    seen: &mut BTreeMap<String, (T, String)>,
    field: &str,
    preset: &str,
    name: &str,
    item: &T,
) -> Result<(), Conflict> {
    match seen.get(name) {
        Some((x, from)) if x != item => Err(Conflict {
            preset: preset.to_string(),
            what: format!("{field}: {name:?} conflicts with {from}"),
        }),
        Some(_) => Ok(()),
        None => {
            seen.insert(
                name.to_string(),
                (item.clone(), format!("PodPreset {preset:?}")),
            );
            Ok(())
        }
    }
}

/// `safeToApplyPodPresetsOnPod`: every preset against the pod and the presets before it.
fn check(pod: &Pod, presets: &[&PodPreset]) -> Result<(), Conflict> {
    let spec = pod.spec.clone().unwrap_or_default();
    let mut volumes: BTreeMap<String, (Volume, String)> = spec
        .volumes
        .iter()
        .flatten()
        .map(|v| (v.name.clone(), (v.clone(), "the pod".to_string())))
        .collect();
    for p in presets {
        let name = p.metadata.name.clone().unwrap_or_default();
        for v in p.spec.volumes.iter().flatten() {
            add_named(&mut volumes, "volumes", &name, &v.name, v)?;
        }
    }
    for c in &spec.containers {
        let mut env: BTreeMap<String, (EnvVar, String)> = c
            .env
            .iter()
            .flatten()
            .map(|e| {
                (
                    e.name.clone(),
                    (e.clone(), format!("container {:?}", c.name)),
                )
            })
            .collect();
        let mut mounts: Vec<(VolumeMount, String)> = c
            .volume_mounts
            .iter()
            .flatten()
            .map(|m| (m.clone(), format!("container {:?}", c.name)))
            .collect();
        for p in presets {
            let name = p.metadata.name.clone().unwrap_or_default();
            for e in p.spec.env.iter().flatten() {
                add_named(&mut env, "env", &name, &e.name, e)?;
            }
            for m in p.spec.volume_mounts.iter().flatten() {
                for (x, from) in &mounts {
                    if x.name == m.name && x != m {
                        return Err(Conflict {
                            preset: name,
                            what: format!("volumeMounts: {:?} conflicts with {from}", m.name),
                        });
                    }
                    if x.mount_path == m.mount_path && x != m {
                        return Err(Conflict {
                            preset: name,
                            what: format!(
                                "volumeMounts: mountPath {:?} conflicts with {from}",
                                m.mount_path
                            ),
                        });
                    }
                }
                mounts.push((m.clone(), format!("PodPreset {name:?}")));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn sel(yaml: &str) -> LabelSelector {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    #[test]
    fn selectors() {
        let l = labels(&[("app", "web"), ("tier", "front")]);
        assert_eq!(matches(None, &l), Ok(false));
        assert_eq!(matches(Some(&sel("{}")), &l), Ok(true));
        assert_eq!(
            matches(Some(&sel("{matchLabels: {app: web}}")), &l),
            Ok(true)
        );
        assert_eq!(
            matches(Some(&sel("{matchLabels: {app: db}}")), &l),
            Ok(false)
        );
        for (e, want) in [
            ("{key: tier, operator: In, values: [front, back]}", true),
            ("{key: tier, operator: NotIn, values: [front]}", false),
            ("{key: env, operator: NotIn, values: [prod]}", true),
            ("{key: app, operator: Exists}", true),
            ("{key: env, operator: DoesNotExist}", true),
            ("{key: app, operator: DoesNotExist}", false),
        ] {
            let s = sel(&format!("{{matchExpressions: [{e}]}}"));
            assert_eq!(matches(Some(&s), &l), Ok(want), "{e}");
        }
        assert!(matches(
            Some(&sel("{matchExpressions: [{key: a, operator: Near}]}")),
            &l
        )
        .is_err());
    }

    fn pod(yaml: &str) -> Pod {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    fn preset(yaml: &str) -> PodPreset {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    const POD: &str = "metadata: {name: web, namespace: default, labels: {app: web}}\nspec:\n  initContainers: [{name: init}]\n  containers:\n  - {name: c, env: [{name: A, value: '1'}], volumeMounts: [{name: data, mountPath: /data}]}\n  volumes: [{name: data, emptyDir: {}}]";

    #[test]
    fn a_matching_preset_is_merged_into_app_containers_only() {
        let mut p = pod(POD);
        let pr = preset("metadata: {name: cache, namespace: default, resourceVersion: '7'}\nspec:\n  selector: {matchLabels: {app: web}}\n  env: [{name: CACHE, value: redis}, {name: A, value: '1'}]\n  envFrom: [{configMapRef: {name: cfg}}]\n  volumeMounts: [{name: cache, mountPath: /cache}]\n  volumes: [{name: cache, emptyDir: {}}]");
        let other = preset("metadata: {name: other}\nspec: {selector: {matchLabels: {app: db}}, env: [{name: X, value: y}]}");
        let o = apply(&mut p, &[pr, other]).unwrap();
        assert_eq!(
            o,
            Outcome {
                applied: vec!["cache".into()],
                conflict: None
            }
        );
        let spec = p.spec.unwrap();
        let c = &spec.containers[0];
        let names: Vec<&str> = c.env.iter().flatten().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["A", "CACHE"]);
        assert_eq!(c.env_from.as_ref().map(Vec::len), Some(1));
        assert_eq!(c.volume_mounts.as_ref().map(Vec::len), Some(2));
        assert_eq!(spec.volumes.as_ref().map(Vec::len), Some(2));
        let init = &spec.init_containers.as_ref().unwrap()[0];
        assert!(
            init.env.is_none() && init.volume_mounts.is_none(),
            "never into init containers"
        );
        assert_eq!(
            p.metadata
                .annotations
                .unwrap()
                .get("podpreset.admission.kubernetes.io/podpreset-cache"),
            Some(&"7".to_string())
        );
    }

    #[test]
    fn a_conflict_applies_no_preset_at_all() {
        for (presets, want) in [
            (vec!["metadata: {name: p1}\nspec: {selector: {}, env: [{name: A, value: '2'}]}"], "PodPreset \"p1\": env: \"A\" conflicts with container \"c\""),
            (vec!["metadata: {name: p1}\nspec: {selector: {}, volumes: [{name: data, hostPath: {path: /x}}]}"], "PodPreset \"p1\": volumes: \"data\" conflicts with the pod"),
            (vec!["metadata: {name: p1}\nspec: {selector: {}, volumeMounts: [{name: other, mountPath: /data}]}"], "PodPreset \"p1\": volumeMounts: mountPath \"/data\" conflicts with container \"c\""),
            (vec!["metadata: {name: p1}\nspec: {selector: {}, env: [{name: B, value: '1'}]}", "metadata: {name: p2}\nspec: {selector: {}, env: [{name: B, value: '2'}]}"], "PodPreset \"p2\": env: \"B\" conflicts with PodPreset \"p1\""),
        ] {
            let mut p = pod(POD);
            let before = p.clone();
            let presets: Vec<PodPreset> = presets.iter().map(|y| preset(y)).collect();
            let o = apply(&mut p, &presets).unwrap();
            assert!(o.applied.is_empty());
            let c = o.conflict.unwrap();
            assert!(c.ends_with(want), "{c}");
            assert!(c.starts_with("conflict occurred while applying podpresets: p1"), "{c}");
            assert_eq!(p, before, "the pod runs as written");
        }
    }

    #[test]
    fn the_exclude_annotation_opts_out() {
        let mut p = pod(POD);
        p.metadata.annotations = Some(labels(&[(EXCLUDE, "true")]));
        let before = p.clone();
        let o = apply(
            &mut p,
            &[preset(
                "metadata: {name: p1}\nspec: {selector: {}, env: [{name: B, value: '1'}]}",
            )],
        )
        .unwrap();
        assert_eq!(o, Outcome::default());
        assert_eq!(p, before);
    }
}
