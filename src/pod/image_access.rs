//! Whether a pod may use an image the store already has (KEP-2535, ensure secret pulled
//! images, beta and on by default since 1.35): kubelet's pull manager
//! (`pkg/kubelet/images/pullmanager`). Each image pulled for a pod has a *pulled record*
//! naming the credentials it was pulled with (a Secret's namespace, name and UID and a
//! hash of the login, or "any pod of the node" for an anonymous or node-wide login), never
//! the credentials themselves. Under `IfNotPresent` or `Never`, a pod that presents none
//! of them must pull the image again with its own, which asks the registry whether they
//! are good. Pure: the records are read and written by `image::pull_records`.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// kubelet's `imagePullCredentialsVerificationPolicy`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VerificationPolicy {
    /// Any image the node has is any pod's.
    NeverVerify,
    /// Images the node had before kubelet pulled them (preloaded) are any pod's; an
    /// image kubelet pulled is checked against its records. kubelet's default.
    NeverVerifyPreloadedImages,
    /// Images matching the list (a repository, or a prefix ending in `/*`) are any pod's.
    NeverVerifyAllowlistedImages(Vec<String>),
    /// Every image is checked.
    AlwaysVerify,
}

/// kubelet's default policy, the one podinit follows.
pub const DEFAULT_POLICY: VerificationPolicy = VerificationPolicy::NeverVerifyPreloadedImages;

impl VerificationPolicy {
    /// `RequireCredentialVerificationForImage`: `image` is the repository without tag or
    /// digest; `pulled_by_kubelet` says that a pulled record or a pull intent exists.
    pub fn require_verification(&self, image: &str, pulled_by_kubelet: bool) -> bool {
        match self {
            VerificationPolicy::NeverVerify => false,
            VerificationPolicy::NeverVerifyPreloadedImages => pulled_by_kubelet,
            VerificationPolicy::NeverVerifyAllowlistedImages(list) => {
                !list.iter().any(|p| match p.strip_suffix('*') {
                    Some(prefix) => image.starts_with(prefix),
                    None => image == p,
                })
            }
            VerificationPolicy::AlwaysVerify => true,
        }
    }
}

/// A Secret a pull was made with (`ImagePullSecret`): its coordinates and the hash of the
/// login it gave for the image's registry.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PullSecret {
    #[serde(default)]
    pub uid: String,
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub credential_hash: String,
}

impl PullSecret {
    fn same_secret(&self, o: &PullSecret) -> bool {
        self.uid == o.uid && self.namespace == o.namespace && self.name == o.name
    }
}

/// Who may use an image of one repository (`ImagePullCredentials`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PullCredentials {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kubernetes_secrets: Vec<PullSecret>,
    /// Pulled anonymously or with the node's own login: any pod of the node may use it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub node_pods_accessible: bool,
}

impl PullCredentials {
    /// What a pull made with `secret`'s login, or with no pod's login, gives
    /// (`trackedToImagePullCreds`).
    pub fn of_pull(secret: Option<PullSecret>) -> PullCredentials {
        match secret {
            Some(s) => PullCredentials {
                kubernetes_secrets: vec![s],
                node_pods_accessible: false,
            },
            None => PullCredentials {
                kubernetes_secrets: Vec::new(),
                node_pods_accessible: true,
            },
        }
    }

    fn is_empty(&self) -> bool {
        !self.node_pods_accessible && self.kubernetes_secrets.is_empty()
    }
}

/// kubelet's `ImagePulledRecord` for one image (by the digest its `imageID` reports):
/// per repository (the image's name without tag or digest), who may use it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PulledRecord {
    pub kind: String,
    pub api_version: String,
    /// RFC 3339, as the caller gave it.
    pub last_updated_time: String,
    pub image_ref: String,
    #[serde(default)]
    pub credential_mapping: BTreeMap<String, PullCredentials>,
}

/// kubelet's kind and version of the record, kept so that it reads as kubelet's own.
pub const RECORD_KIND: &str = "ImagePulledRecord";
pub const RECORD_API_VERSION: &str = "kubelet.config.k8s.io/v1alpha1";

/// What the store knows of an image's past pulls.
#[derive(Clone, Copy, Debug)]
pub struct Known<'a> {
    pub record: Option<&'a PulledRecord>,
    /// A pull of the image began and never ended (kubelet's pull intent).
    pub intent: bool,
}

/// The answer of [`must_attempt_pull`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// The pod must pull (verify its credentials with the registry) before using it.
    pub pull: bool,
    /// A Secret of the pod that matched by its login or by its coordinates but is not in
    /// the record as it is: added, so that the next check finds it.
    pub remember: Option<PullSecret>,
}

impl Verdict {
    fn pull(pull: bool) -> Verdict {
        Verdict {
            pull,
            remember: None,
        }
    }
}

/// kubelet stops adding matching Secrets to a record once it names this many
/// (`writeRecordWhileMatchingLimit`).
pub const REMEMBER_LIMIT: usize = 100;

/// `MustAttemptImagePull`: whether a pod that presents `pod_secrets` (its
/// imagePullSecrets' logins for the image's registry, with their coordinates) must pull
/// `repository` (the image's name without tag or digest) although the store has it.
pub fn must_attempt_pull(
    policy: &VerificationPolicy,
    repository: &str,
    known: Known,
    pod_secrets: &[PullSecret],
) -> Verdict {
    let pulled_by_kubelet = known.record.is_some() || known.intent;
    if !policy.require_verification(repository, pulled_by_kubelet) {
        return Verdict::pull(false);
    }
    let Some(record) = known.record else {
        return Verdict::pull(true);
    };
    let Some(cached) = record.credential_mapping.get(repository) else {
        return Verdict::pull(true);
    };
    if cached.node_pods_accessible {
        return Verdict::pull(false);
    }
    if cached.kubernetes_secrets.is_empty() {
        return Verdict::pull(true);
    }
    let room = cached.kubernetes_secrets.len() < REMEMBER_LIMIT;
    for pod in pod_secrets {
        for c in &cached.kubernetes_secrets {
            let hashes_match =
                !c.credential_hash.is_empty() && pod.credential_hash == c.credential_hash;
            let same_secret = pod.same_secret(c);
            if hashes_match {
                return Verdict {
                    pull: false,
                    remember: (!same_secret && room).then(|| pod.clone()),
                };
            }
            // The Secret was updated since: kubelet trusts it and records its new hash.
            if same_secret && room {
                return Verdict {
                    pull: false,
                    remember: Some(pod.clone()),
                };
            }
        }
    }
    Verdict::pull(true)
}

/// `writePulledRecordIfChanged`: the record of `image_ref` once a pull for `repository`
/// made with `creds` succeeded (or a check matched), or `None` when `old` already says it.
/// `creds` `None` marks a pull whose credentials are unknown (an interrupted one found
/// later): the image counts as pulled, and every pod must verify.
pub fn record_pulled(
    old: Option<&PulledRecord>,
    image_ref: &str,
    repository: &str,
    creds: Option<&PullCredentials>,
    now: &str,
) -> Option<PulledRecord> {
    let Some(old) = old else {
        let mut r = PulledRecord {
            kind: RECORD_KIND.into(),
            api_version: RECORD_API_VERSION.into(),
            last_updated_time: now.into(),
            image_ref: image_ref.into(),
            credential_mapping: BTreeMap::new(),
        };
        if let Some(c) = creds {
            r.credential_mapping.insert(repository.into(), c.clone());
        }
        return Some(r);
    };
    let new = creds.filter(|c| !c.is_empty())?;
    let mut selected = match old.credential_mapping.get(repository) {
        None => {
            let mut r = old.clone();
            r.credential_mapping.insert(repository.into(), new.clone());
            r.last_updated_time = now.into();
            return Some(r);
        }
        Some(s) if s.node_pods_accessible => return None,
        Some(s) => s.clone(),
    };
    if new.node_pods_accessible {
        selected = PullCredentials::of_pull(None);
    } else {
        let merged = merge_secrets(&selected.kubernetes_secrets, &new.kubernetes_secrets)?;
        selected.kubernetes_secrets = merged;
    }
    let mut r = old.clone();
    r.credential_mapping.insert(repository.into(), selected);
    r.last_updated_time = now.into();
    Some(r)
}

/// `mergePullSecrets`: one entry per Secret (the newer hash wins), sorted by namespace,
/// name and UID; `None` when nothing changed.
fn merge_secrets(orig: &[PullSecret], new: &[PullSecret]) -> Option<Vec<PullSecret>> {
    let key = |s: &PullSecret| (s.namespace.clone(), s.name.clone(), s.uid.clone());
    let mut set: BTreeMap<(String, String, String), String> = orig
        .iter()
        .map(|s| (key(s), s.credential_hash.clone()))
        .collect();
    let mut changed = false;
    for s in new {
        if set.get(&key(s)) != Some(&s.credential_hash) {
            changed = true;
            set.insert(key(s), s.credential_hash.clone());
        }
    }
    changed.then(|| {
        set.into_iter()
            .map(|((namespace, name, uid), credential_hash)| PullSecret {
                uid,
                namespace,
                name,
                credential_hash,
            })
            .collect()
    })
}

#[cfg(test)]
mod tests;
