//! Recursive read-only mounts (KEP-3857): whether a `volumeMount` is mounted read-only
//! with every mount below it too, as kubelet decides it (`resolveRecursiveReadOnly` in
//! pkg/kubelet/kubelet_pods.go) from the mount and whether the runtime can
//! (`mount_setattr(2)` with `AT_RECURSIVE`, Linux 5.12).

use k8s_openapi::api::core::v1::VolumeMount;

/// The mount's resolved mode: `Ok(true)` recursively read-only, `Ok(false)` not (only
/// its top mount is read-only, if `readOnly`). `IfPossible` falls back to `false` where
/// the runtime cannot; `Enabled` there is an error, the container's
/// `CreateContainerConfigError` (kubelet prefixes it with [`ERROR_PREFIX`]).
pub fn resolve(m: &VolumeMount, runtime_supports: bool) -> Result<bool, Error> {
    let mode = match m.recursive_read_only.as_deref() {
        None | Some("Disabled") => return Ok(false),
        Some(mode) => mode,
    };
    let volume = || m.name.clone();
    if m.read_only != Some(true) {
        return Err(Error::NotReadOnly(volume()));
    }
    if let Some(p) = m.mount_propagation.as_deref().filter(|p| *p != "None") {
        return Err(Error::Propagation {
            volume: volume(),
            propagation: p.to_string(),
        });
    }
    match mode {
        "IfPossible" => Ok(runtime_supports),
        "Enabled" if runtime_supports => Ok(true),
        "Enabled" => Err(Error::NotSupported(volume())),
        other => Err(Error::UnknownMode(other.to_string())),
    }
}

/// Why a mount's recursive read-only mode cannot be had, in kubelet's words: the volume,
/// and what stands in the way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    NotReadOnly(String),
    Propagation {
        volume: String,
        propagation: String,
    },
    /// `Enabled` where the runtime cannot.
    NotSupported(String),
    UnknownMode(String),
    /// One of a container's mounts, said with kubelet's [`ERROR_PREFIX`].
    Unresolved(Box<Error>),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const WANTED: &str = "requested recursive read-only mode, but it is";
        match self {
            Error::NotReadOnly(v) => write!(f, "volume {v:?} {WANTED} not read-only"),
            Error::Propagation {
                volume,
                propagation,
            } => write!(
                f,
                "volume {volume:?} {WANTED} not compatible with propagation {propagation:?}"
            ),
            Error::NotSupported(v) => {
                write!(f, "volume {v:?} {WANTED} not supported by the runtime")
            }
            Error::UnknownMode(m) => write!(f, "unknown recursive read-only mode {m:?}"),
            Error::Unresolved(e) => write!(f, "{ERROR_PREFIX}{e}"),
        }
    }
}

impl std::error::Error for Error {}

/// What kubelet puts before [`resolve`]'s error in the container's waiting message
/// (`makeMounts`).
pub const ERROR_PREFIX: &str = "failed to resolve recursive read-only mode: ";

/// Each of a container's mounts resolved, in order; the first error with kubelet's
/// prefix.
pub fn resolve_all(mounts: &[VolumeMount], runtime_supports: bool) -> Result<Vec<bool>, Error> {
    mounts
        .iter()
        .map(|m| resolve(m, runtime_supports).map_err(|e| Error::Unresolved(Box::new(e))))
        .collect()
}

/// `volumeMounts[].recursiveReadOnly` of the container status
/// (`convertToAPIContainerStatuses`): `Enabled` or `Disabled` as resolved for a
/// read-only mount, nothing for a read-write one.
pub fn status(m: &VolumeMount, runtime_supports: bool) -> Option<&'static str> {
    let read_only = m.read_only == Some(true);
    read_only.then(|| match resolve(m, runtime_supports) {
        Ok(true) => "Enabled",
        _ => "Disabled",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mount(read_only: bool, propagation: Option<&str>, rro: Option<&str>) -> VolumeMount {
        VolumeMount {
            name: "foo".into(),
            mount_path: "/mnt".into(),
            read_only: Some(read_only),
            mount_propagation: propagation.map(Into::into),
            recursive_read_only: rro.map(Into::into),
            ..Default::default()
        }
    }

    /// kubelet's `TestResolveRecursiveReadOnly`: each mount with and without runtime
    /// support, `None` where an error is expected.
    #[test]
    fn kubelets_cases() {
        let cases: &[(VolumeMount, Option<bool>, Option<bool>)] = &[
            (mount(false, None, None), Some(false), Some(false)),
            (mount(true, None, None), Some(false), Some(false)),
            (
                mount(false, None, Some("Disabled")),
                Some(false),
                Some(false),
            ),
            (
                mount(true, None, Some("Disabled")),
                Some(false),
                Some(false),
            ),
            (mount(false, None, Some("IfPossible")), None, None),
            (
                mount(true, None, Some("IfPossible")),
                Some(false),
                Some(true),
            ),
            (
                mount(true, Some("HostToContainer"), Some("IfPossible")),
                None,
                None,
            ),
            (
                mount(true, Some("Bidirectional"), Some("IfPossible")),
                None,
                None,
            ),
            (
                mount(true, Some("None"), Some("IfPossible")),
                Some(false),
                Some(true),
            ),
            (mount(false, None, Some("Enabled")), None, None),
            (mount(true, None, Some("Enabled")), None, Some(true)),
            (
                mount(true, Some("HostToContainer"), Some("Enabled")),
                None,
                None,
            ),
            (
                mount(true, Some("Bidirectional"), Some("Enabled")),
                None,
                None,
            ),
            (mount(true, Some("None"), Some("Enabled")), None, Some(true)),
            (mount(true, None, Some("foo")), None, None),
        ];
        for (m, unsupported, supported) in cases {
            assert_eq!(
                resolve(m, false).ok(),
                *unsupported,
                "{m:?} without support"
            );
            assert_eq!(resolve(m, true).ok(), *supported, "{m:?} with support");
        }
    }

    #[test]
    fn errors_say_what_kubelet_says() {
        let e = resolve_all(&[mount(true, None, Some("Enabled"))], false)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "failed to resolve recursive read-only mode: volume \"foo\" requested recursive read-only mode, but it is not supported by the runtime"
        );
        let e = resolve(&mount(false, None, Some("Enabled")), true)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "volume \"foo\" requested recursive read-only mode, but it is not read-only"
        );
        let e = resolve(
            &mount(true, Some("HostToContainer"), Some("IfPossible")),
            true,
        );
        assert_eq!(
            e.unwrap_err().to_string(),
            "volume \"foo\" requested recursive read-only mode, but it is not compatible with propagation \"HostToContainer\""
        );
    }

    /// The e2e test's five mounts of one volume (`podForRROSupported` and
    /// `podForRROUnsupported`): `IfPossible` reports what it became.
    #[test]
    fn the_status_reports_the_resolved_mode() {
        let rro = mount(true, Some("None"), Some("Enabled"));
        let if_possible = mount(true, None, Some("IfPossible"));
        let disabled = mount(true, None, Some("Disabled"));
        let ro = mount(true, None, None);
        let rw = mount(false, None, None);
        assert_eq!(status(&rro, true), Some("Enabled"));
        assert_eq!(status(&if_possible, true), Some("Enabled"));
        assert_eq!(status(&if_possible, false), Some("Disabled"));
        for s in [true, false] {
            assert_eq!(status(&disabled, s), Some("Disabled"));
            assert_eq!(status(&ro, s), Some("Disabled"));
            assert_eq!(status(&rw, s), None);
        }
    }
}
