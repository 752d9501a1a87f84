//! A volume mount's `subPath`, and `subPathExpr` expanded against the container's
//! environment, as kubelet makes them when it creates the container (`makeMounts` in
//! pkg/kubelet/kubelet_pods.go, with `ExpandContainerVolumeMounts` in
//! pkg/kubelet/container/helpers.go). Each error is the container's
//! `CreateContainerConfigError` message, worded as kubelet's.

use k8s_openapi::api::core::v1::VolumeMount;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path};

/// Why a mount's sub-path cannot be made, in kubelet's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// `subPathExpr` refers to these variables, missing or empty.
    MissingValues(Vec<String>),
    /// The sub-path is absolute.
    Absolute(String),
    /// The sub-path has a `..` component.
    Backsteps(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::MissingValues(names) => write!(f, "missing value for {}", names.join(", ")),
            Error::Absolute(p) => write!(f, "error SubPath `{p}` must not be an absolute path"),
            Error::Backsteps(p) => {
                write!(
                    f,
                    "unable to provision SubPath `{p}`: must not contain '..'"
                )
            }
        }
    }
}

impl std::error::Error for Error {}

/// `ExpandContainerVolumeMounts`: `$(VAR)` replaced by the variable's value (`$$` is a
/// `$`); a variable that is missing or empty is an error naming every such variable.
pub fn expand(expr: &str, env: &[(String, String)]) -> Result<String, Error> {
    // The last definition of a name wins, as in kubelet's `envVarsToMap`.
    let vars: BTreeMap<&str, &str> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut missing = BTreeSet::new();
    let out = super::expansion::expand_with(expr, |name| {
        let v = vars.get(name).copied().unwrap_or_default();
        if v.is_empty() {
            missing.insert(name.to_string());
        }
        Some(v.to_string())
    });
    if missing.is_empty() {
        Ok(out)
    } else {
        Err(Error::MissingValues(missing.into_iter().collect()))
    }
}

/// The checks `makeMounts` runs on a mount's sub-path before it joins it to the volume.
pub fn check(sub_path: &str) -> Result<(), Error> {
    let p = Path::new(sub_path);
    if p.is_absolute() {
        return Err(Error::Absolute(sub_path.to_string()));
    }
    // `ValidatePathNoBacksteps`.
    if p.components().any(|c| c == Component::ParentDir) {
        return Err(Error::Backsteps(sub_path.to_string()));
    }
    Ok(())
}

/// Each mount's sub-path (`None`: the whole volume), `subPathExpr` expanded with the
/// container's resolved environment; the first error as kubelet words it.
pub fn resolve_all(
    mounts: &[VolumeMount],
    env: &[(String, String)],
) -> Result<Vec<Option<String>>, Error> {
    mounts
        .iter()
        .map(|m| {
            let sub = match m.sub_path_expr.as_deref().filter(|e| !e.is_empty()) {
                Some(expr) => expand(expr, env)?,
                None => m.sub_path.clone().unwrap_or_default(),
            };
            if sub.is_empty() {
                return Ok(None);
            }
            check(&sub)?;
            Ok(Some(sub))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn expr(e: &str) -> VolumeMount {
        VolumeMount {
            name: "v".into(),
            mount_path: "/m".into(),
            sub_path_expr: Some(e.into()),
            ..Default::default()
        }
    }

    /// An expression, the environment, and the sub-path or error.
    type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], Result<&'a str, &'a str>);

    /// kubelet's `TestExpandVolumeMountsWithSubpath` cases.
    #[test]
    fn expansion_as_kubelet_expands_a_sub_path_expr() {
        let cases: &[Case] = &[
            ("$(POD_NAME)", &[("POD_NAME", "foo")], Ok("foo")),
            (
                "$(POD_NAME)/$(NS)",
                &[("POD_NAME", "foo"), ("NS", "bar")],
                Ok("foo/bar"),
            ),
            ("a/b", &[], Ok("a/b")),
            ("$$(POD_NAME)", &[], Ok("$(POD_NAME)")),
            (
                "$(MISSING)",
                &[("POD_NAME", "foo")],
                Err("missing value for MISSING"),
            ),
            ("$(EMPTY)", &[("EMPTY", "")], Err("missing value for EMPTY")),
            ("$(B)/$(A)", &[], Err("missing value for A, B")),
            ("$(X)", &[("X", "1"), ("X", "2")], Ok("2")),
        ];
        for (input, vars, want) in cases {
            let got = expand(input, &env(vars));
            let got = got.as_deref().map_err(|e| e.to_string());
            assert_eq!(got, want.map_err(str::to_string), "{input:?}");
        }
    }

    #[test]
    fn the_expanded_path_is_checked_as_makemounts_checks_it() {
        let e = env(&[("ABS", "/etc"), ("UP", "../x"), ("OK", "logs")]);
        let refusal = |m| resolve_all(&[m], &e).unwrap_err().to_string();
        assert_eq!(
            refusal(expr("$(ABS)")),
            "error SubPath `/etc` must not be an absolute path"
        );
        assert_eq!(
            refusal(expr("a/$(UP)")),
            "unable to provision SubPath `a/../x`: must not contain '..'"
        );
        let plain = VolumeMount {
            sub_path: Some("fixed".into()),
            ..expr("")
        };
        let none = VolumeMount {
            sub_path_expr: None,
            ..expr("")
        };
        assert_eq!(
            resolve_all(&[expr("$(OK)/x"), plain, none], &e),
            Ok(vec![Some("logs/x".into()), Some("fixed".into()), None])
        );
    }
}
