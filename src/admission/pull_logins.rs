//! The pod's logins for registries: its `imagePullSecrets`' docker configs, in the pod's
//! order, each with what kubelet's pull manager knows a Secret by (namespace, name, UID
//! and a hash of the login). The puller pulls with them and records which one pulled an
//! image; the supervisor checks a pod's against those records (`pod::image_access`).

use k8s_openapi::api::core::v1::{Pod, Secret};

use crate::image::pull_records::credential_hash;
use crate::image::reference::Reference;
use crate::image::registry::{self, Credential};
use crate::pod::image_access::{PullCredentials, PullSecret};

/// A login and the Secret it came from (none for the node's own docker config).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Login {
    pub credential: Credential,
    pub secret: Option<PullSecret>,
}

/// A docker config and where it came from.
#[derive(Clone, Debug)]
pub struct Config {
    /// For a warning when it cannot be read: `secret "regcred"`, or a file's path.
    pub from: String,
    /// The Secret's coordinates (its hash left empty), for a Secret's.
    pub secret: Option<PullSecret>,
    /// JSON with an `auths` object.
    pub json: Vec<u8>,
}

/// The docker configs of the pod's `imagePullSecrets` that it was given, in its order.
pub fn secret_configs(pod: &Pod, secrets: &[Secret]) -> Vec<Config> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let names = pod
        .spec
        .iter()
        .flat_map(|s| s.image_pull_secrets.iter().flatten());
    let mut out = Vec::new();
    for name in names {
        let Some(s) = secrets
            .iter()
            .find(|s| s.metadata.name.as_deref() == Some(name.name.as_str()))
        else {
            continue;
        };
        if let Some(json) = docker_config_of(s) {
            out.push(Config {
                from: format!("secret {:?}", name.name),
                secret: Some(PullSecret {
                    uid: s.metadata.uid.clone().unwrap_or_default(),
                    namespace: s
                        .metadata
                        .namespace
                        .clone()
                        .unwrap_or_else(|| namespace.to_string()),
                    name: name.name.clone(),
                    credential_hash: String::new(),
                }),
                json,
            });
        }
    }
    out
}

/// Every login of `configs`, each with its Secret and the hash of that login; a config
/// that does not parse is warned about and skipped.
pub fn logins(configs: &[Config]) -> Vec<Login> {
    let mut out = Vec::new();
    for c in configs {
        match registry::credentials_from_docker_config(&c.json) {
            Ok(creds) => out.extend(creds.into_iter().map(|credential| Login {
                secret: c.secret.clone().map(|s| PullSecret {
                    credential_hash: credential_hash(&credential),
                    ..s
                }),
                credential,
            })),
            Err(e) => crate::log::warn(&format!("image pull credentials from {}: {e}", c.from)),
        }
    }
    out
}

/// What the pod presents for `name` (kubelet's `getPodCredentials`): its Secrets' logins
/// for the image's registry, the most specific first.
pub fn presented(logins: &[Login], name: &Reference) -> Vec<PullSecret> {
    let creds: Vec<Credential> = logins.iter().map(|l| l.credential.clone()).collect();
    let mut out = Vec::new();
    for c in registry::logins_for(&creds, name) {
        let secret = logins
            .iter()
            .filter(|l| &l.credential == c)
            .find_map(|l| l.secret.clone());
        if let Some(s) = secret.filter(|s| !out.contains(s)) {
            out.push(s);
        }
    }
    out
}

/// Who may use an image that a pull presenting `used` fetched: that login's Secret, or
/// any pod for no login or the node's own.
pub fn pulled_with(logins: &[Login], used: Option<&Credential>) -> PullCredentials {
    let secret = used.and_then(|c| {
        logins
            .iter()
            .find(|l| &l.credential == c)
            .and_then(|l| l.secret.clone())
    });
    PullCredentials::of_pull(secret)
}

/// A Secret's docker config: `kubernetes.io/dockerconfigjson` (`.dockerconfigjson`, an
/// object with `auths`) or the older `kubernetes.io/dockercfg` (`.dockercfg`, the `auths`
/// object itself).
pub fn docker_config_of(s: &Secret) -> Option<Vec<u8>> {
    let data = s.data.as_ref()?;
    match s.type_.as_deref() {
        Some("kubernetes.io/dockerconfigjson") => Some(data.get(".dockerconfigjson")?.0.clone()),
        Some("kubernetes.io/dockercfg") => {
            let auths: serde_json::Value =
                serde_json::from_slice(&data.get(".dockercfg")?.0).ok()?;
            serde_json::to_vec(&serde_json::json!({ "auths": auths })).ok()
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    fn secret(name: &str, type_: &str, key: &str, value: &str) -> Secret {
        Secret {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            type_: Some(type_.into()),
            data: Some([(key.to_string(), ByteString(value.as_bytes().to_vec()))].into()),
            ..Default::default()
        }
    }

    fn pod(secrets: &str) -> Pod {
        serde_yaml_ng::from_str(&format!(
            "metadata: {{name: p, namespace: team}}\nspec:\n  containers: []\n  imagePullSecrets: {secrets}"
        ))
        .unwrap()
    }

    #[test]
    fn pull_secrets_in_the_pods_order_and_of_docker_types_only() {
        let auths = r#"{"auths":{"r:5000":{"auth":"dTpw"}}}"#;
        let secrets = [
            secret(
                "b",
                "kubernetes.io/dockerconfigjson",
                ".dockerconfigjson",
                auths,
            ),
            secret(
                "a",
                "kubernetes.io/dockercfg",
                ".dockercfg",
                r#"{"r:5001":{"auth":"dTpw"}}"#,
            ),
            secret("c", "Opaque", ".dockerconfigjson", auths),
        ];
        let got = secret_configs(
            &pod("[{name: a}, {name: c}, {name: missing}, {name: b}]"),
            &secrets,
        );
        let from: Vec<&str> = got.iter().map(|c| c.from.as_str()).collect();
        assert_eq!(from, ["secret \"a\"", "secret \"b\""]);
        let legacy: serde_json::Value = serde_json::from_slice(&got[0].json).unwrap();
        assert_eq!(legacy["auths"]["r:5001"]["auth"], "dTpw");
        assert_eq!(got[1].json, auths.as_bytes());
        // A Secret is known by the pod's namespace when it names none.
        assert_eq!(got[1].secret.as_ref().unwrap().namespace, "team");
    }

    #[test]
    fn a_pod_presents_its_secrets_logins_for_the_registry_and_a_pull_names_the_one_used() {
        let secrets = [
            secret(
                "regcred",
                "kubernetes.io/dockerconfigjson",
                ".dockerconfigjson",
                r#"{"auths":{"r:5000":{"auth":"dTpw"},"other:5000":{"auth":"dTpx"}}}"#,
            ),
            secret(
                "team",
                "kubernetes.io/dockerconfigjson",
                ".dockerconfigjson",
                r#"{"auths":{"r:5000/team":{"auth":"dTpx"}}}"#,
            ),
        ];
        let l = logins(&secret_configs(
            &pod("[{name: regcred}, {name: team}]"),
            &secrets,
        ));
        let image = Reference::parse("r:5000/team/app:v1").unwrap();
        let shown: Vec<(String, usize)> = presented(&l, &image)
            .into_iter()
            .map(|s| (s.name, s.credential_hash.len()))
            .collect();
        assert_eq!(shown, [("team".into(), 64), ("regcred".into(), 64)]);
        let elsewhere = Reference::parse("docker.io/library/busybox:1").unwrap();
        assert!(presented(&l, &elsewhere).is_empty());
        let used = pulled_with(&l, Some(&l[0].credential));
        assert_eq!(used.kubernetes_secrets[0].name, "regcred");
        assert!(pulled_with(&l, None).node_pods_accessible);
        let node = Credential {
            registry: "r:5000".into(),
            username: "node".into(),
            password: "x".into(),
        };
        assert!(pulled_with(&l, Some(&node)).node_pods_accessible);
    }
}
