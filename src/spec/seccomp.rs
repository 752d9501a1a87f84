//! The container's `linux.seccomp`, chosen as kubelet and containerd's CRI choose it.
//!
//! - kubelet (`fieldSeccompProfile`): the container's `securityContext.seccompProfile`,
//!   else the pod's, else `Unconfined` (kubelet's `SeccompDefault` is off by default). A
//!   `Localhost` profile is `<seccomp root>/<localhostProfile>`.
//! - containerd (`generateSeccompSpecOpts`): a privileged container gets no filter whatever
//!   was asked; `Unconfined` none; `RuntimeDefault` its default profile, made for the final
//!   bounding set; `Localhost` the file's JSON, read at every container start (missing or
//!   invalid: the start fails, `CreateContainerError`, and is retried with backoff).
//!
//! The base's own `linux.seccomp` is always replaced: containerd builds a container's
//! spec from its defaults and the image config, which holds no seccomp, so the filter a
//! container gets depends on the pod alone — as in Kubernetes.

use k8s_openapi::api::core::v1::SeccompProfile;
use oci_spec::runtime::{LinuxSeccomp, Spec};
use std::path::Path;

use super::{seccomp_default, Ctx, Error, Result};

/// Sets `linux.seccomp`; after the capabilities, which the default profile follows.
pub fn with_seccomp(spec: &mut Spec, ctx: &Ctx) -> Result<()> {
    let csc = ctx.container.security_context.as_ref();
    let chosen: Option<&SeccompProfile> =
        csc.and_then(|s| s.seccomp_profile.as_ref()).or_else(|| {
            ctx.pod
                .security_context
                .as_ref()
                .and_then(|s| s.seccomp_profile.as_ref())
        });
    let profile = match chosen.map(|p| (p.type_.as_str(), p)) {
        _ if ctx.privileged() => None,
        None | Some(("Unconfined", _)) => None,
        Some(("RuntimeDefault", _)) => {
            let mut bounding: Vec<String> = spec
                .process()
                .as_ref()
                .and_then(|p| p.capabilities().as_ref())
                .and_then(|c| c.bounding().as_ref())
                .into_iter()
                .flatten()
                .map(|c| format!("CAP_{c}"))
                .collect();
            bounding.sort();
            Some(seccomp_default::profile(
                &bounding,
                seccomp_default::kernel_version(),
            )?)
        }
        Some(("Localhost", p)) => Some(localhost(
            &ctx.cx
                .seccomp_root
                .join(p.localhost_profile.as_deref().unwrap_or_default()),
        )?),
        Some((t, _)) => return Err(Error::Invalid(format!("type: Unsupported value: {t:?}"))),
    };
    super::linux_mut(spec).set_seccomp(profile);
    Ok(())
}

/// A Localhost profile: an OCI `LinuxSeccomp` in JSON. containerd's messages.
fn localhost(path: &Path) -> Result<LinuxSeccomp> {
    let text = std::fs::read(path).map_err(|err| Error::Io {
        what: format!("cannot load seccomp profile {:?}", path.display()),
        err,
    })?;
    let parsed: LinuxSeccomp = crate::tracked::from_slice(&text).map_err(|e| {
        Error::Invalid(format!(
            "decoding seccomp profile failed {:?}: {e}",
            path.display()
        ))
    })?;
    // Refuse what the runtime cannot do now, naming the file, rather than at the start.
    crate::runtime::seccomp::compile(&parsed)
        .map_err(|e| Error::Invalid(format!("seccomp profile {:?}: {e}", path.display())))?;
    Ok(parsed)
}
