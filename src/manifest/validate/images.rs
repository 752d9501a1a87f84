//! A container's `imagePullPolicy` and the pod's `imagePullSecrets`, with the API
//! server's rules and words.

use k8s_openapi::api::core::v1::{Container, PodSpec};

use super::{err, R};
use crate::pod::image_pull::POLICIES;

/// `imagePullPolicy` (defaulted before) is one of the three the API server knows.
pub(super) fn pull_policy(c: &Container, p: &str) -> R {
    match c.image_pull_policy.as_deref() {
        None => Ok(()),
        Some(v) if POLICIES.contains(&v) => Ok(()),
        Some(v) => err(
            format!("{p}.imagePullPolicy"),
            format!("Unsupported value: {v:?}: supported values: \"Always\", \"IfNotPresent\", \"Never\""),
        ),
    }
}

/// Every `imagePullSecrets` entry names a Secret.
pub(super) fn pull_secrets(spec: &PodSpec) -> R {
    for (i, s) in spec.image_pull_secrets.iter().flatten().enumerate() {
        if s.name.is_empty() {
            return err(format!("spec.imagePullSecrets[{i}].name"), "Required value");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_and_secrets() {
        let c = |p: &str| -> Container {
            serde_yaml_ng::from_str(&format!("{{name: a, image: x, imagePullPolicy: {p}}}"))
                .unwrap()
        };
        for ok in POLICIES {
            assert!(pull_policy(&c(ok), "spec.containers[0]").is_ok());
        }
        let e = pull_policy(&c("Sometimes"), "spec.containers[0]").unwrap_err();
        assert_eq!(e.field, "spec.containers[0].imagePullPolicy");
        assert_eq!(
            e.message,
            "Unsupported value: \"Sometimes\": supported values: \"Always\", \"IfNotPresent\", \"Never\""
        );
        let spec: PodSpec =
            serde_yaml_ng::from_str("containers: []\nimagePullSecrets: [{name: a}, {}]").unwrap();
        let e = pull_secrets(&spec).unwrap_err();
        assert_eq!(
            (e.field.as_str(), e.message.as_str()),
            ("spec.imagePullSecrets[1].name", "Required value")
        );
    }
}
