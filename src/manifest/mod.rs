//! Admission: load a manifest (YAML or JSON, one or more documents), check it strictly,
//! apply Kubernetes' defaults and validate it. Every error is one line that names the
//! field (`spec.containers[1].name: Duplicate value: "web"`).

mod defaults;
pub mod env;
pub mod env_file;
pub mod ephemeral;
pub mod files;
mod load;
pub mod preset;
pub mod strict;
mod validate;

pub use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
pub use validate::{dns1123_subdomain as validate_dns1123_subdomain, is_extended_resource_name};

use std::path::Path;

/// One admitted manifest: the Pod with Kubernetes' defaults, and the ConfigMaps and Secrets
/// of the same file.
#[derive(Clone, Debug)]
pub struct Admitted {
    pub pod: Pod,
    pub config_maps: Vec<ConfigMap>,
    pub secrets: Vec<Secret>,
    /// The PodPresets applied, or the conflict that stopped them.
    pub presets: preset::Outcome,
}

/// An admission error: the field path (or the document / file position) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub field: String,
    pub message: String,
}

impl Error {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Error {
        Error {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let one_line = |s: &str| s.replace('\n', " ");
        write!(f, "{}: {}", one_line(&self.field), one_line(&self.message))
    }
}

impl std::error::Error for Error {}

pub fn load_file(path: &Path) -> Result<Admitted, Error> {
    load_with_presets(path, None)
}

/// The manifest, plus every PodPreset in the manifests of `presets_dir` (`--presets`).
pub fn load_with_presets(path: &Path, presets_dir: Option<&Path>) -> Result<Admitted, Error> {
    // The caller names the file before the error.
    let text = std::fs::read_to_string(path).map_err(|e| Error::new("reading", e.to_string()))?;
    let mut docs = load::documents(&text)?;
    if let Some(dir) = presets_dir {
        let err =
            |e: std::io::Error| Error::new(format!("--presets {}", dir.display()), e.to_string());
        let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
            .map_err(err)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.extension()
                    .is_some_and(|x| x == "yaml" || x == "yml" || x == "json")
            })
            .collect();
        files.sort();
        for f in files {
            let t = std::fs::read_to_string(&f).map_err(err)?;
            for d in load::documents(&t)
                .map_err(|e| Error::new(format!("{}: {}", f.display(), e.field), e.message))?
            {
                if d["kind"] != "PodPreset" {
                    return Err(Error::new(
                        f.display().to_string(),
                        format!(
                            "kind {:?}: a presets directory holds PodPresets only",
                            d["kind"].as_str().unwrap_or("")
                        ),
                    ));
                }
                docs.push(d);
            }
        }
    }
    from_documents(docs, &|| {
        uuid_v4(&crate::util::random_bytes(16).unwrap_or_else(|_| vec![0; 16]))
    })
}

pub fn load_str(text: &str) -> Result<Admitted, Error> {
    let docs = load::documents(text)?;
    from_documents(docs, &|| {
        uuid_v4(&crate::util::random_bytes(16).unwrap_or_else(|_| vec![0; 16]))
    })
}

/// Admit parsed documents; `new_uid` makes `metadata.uid` when the Pod has none.
pub fn from_documents(
    docs: Vec<serde_json::Value>,
    new_uid: &dyn Fn() -> String,
) -> Result<Admitted, Error> {
    let mut pod = None;
    let mut config_maps = Vec::new();
    let mut secrets = Vec::new();
    let mut presets = Vec::new();
    for (n, mut doc) in docs.into_iter().enumerate() {
        let at = format!("document {}", n + 1);
        let api = doc["apiVersion"].as_str().unwrap_or_default().to_string();
        let kind = doc["kind"].as_str().unwrap_or_default().to_string();
        if api.is_empty() {
            return Err(Error::new(format!("{at}: apiVersion"), "Required value"));
        }
        if kind.is_empty() {
            return Err(Error::new(format!("{at}: kind"), "Required value"));
        }
        match (api.as_str(), kind.as_str()) {
            ("v1", "Pod") => {
                if pod.is_some() {
                    let name = doc["metadata"]["name"].as_str().unwrap_or("").to_string();
                    return Err(Error::new(
                        at,
                        format!("a second Pod ({name:?}): a manifest holds exactly one Pod"),
                    ));
                }
                strict::normalize_quantities(&mut doc);
                let p = strict::pod(&doc)?;
                strict::unknown_fields(&doc, &p)?;
                pod = Some(p);
            }
            ("v1", "ConfigMap") => {
                let c: ConfigMap = strict::typed(&doc).map_err(|e| Error::new(format!("{at} (ConfigMap): {}", e.field), e.message))?;
                config_maps.push(c);
            }
            ("v1", "Secret") => {
                let s: Secret = strict::typed(&doc).map_err(|e| Error::new(format!("{at} (Secret): {}", e.field), e.message))?;
                secrets.push(defaults::secret(s));
            }
            (preset::API_VERSION, "PodPreset") => {
                let p: preset::PodPreset = strict::typed(&doc).map_err(|e| {
                    Error::new(format!("{at} (PodPreset): {}", e.field), e.message)
                })?;
                presets.push(p);
            }
            _ => {
                return Err(Error::new(
                    at,
                    format!("apiVersion {api:?}, kind {kind:?}: not supported (a manifest holds one v1 Pod, v1 ConfigMaps and v1 Secrets)"),
                ))
            }
        }
    }
    let mut pod =
        pod.ok_or_else(|| Error::new("manifest", "no Pod (apiVersion: v1, kind: Pod) in it"))?;
    defaults::pod(&mut pod, new_uid);
    let presets = preset::apply(&mut pod, &presets)?;
    strict::alpha(&pod)?;
    validate::pod(&pod)?;
    strict::unsupported(&pod)?;
    Ok(Admitted {
        pod,
        config_maps,
        secrets,
        presets,
    })
}

/// The API server's validation of a pod (what a resize is checked against again).
pub fn validate_pod(pod: &Pod) -> Result<(), Error> {
    validate::pod(pod)
}

/// The effective Pod as YAML (`podinit validate`).
pub fn effective_yaml(pod: &Pod) -> String {
    // Through a Value: the Pod's serializers are instantiated once, for Value, not again
    // for YAML (binary size).
    serde_json::to_value(pod)
        .ok()
        .and_then(|v| serde_yaml_ng::to_string(&v).ok())
        .unwrap_or_default()
}

/// RFC 4122 version-4 UUID text from 16 random bytes.
pub fn uuid_v4(b: &[u8]) -> String {
    let mut b: [u8; 16] = b.try_into().unwrap_or([0; 16]);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

#[cfg(test)]
mod tests;
