//! A CRI sandbox's spec run by the shim: podinit's pause in place of the image's program,
//! the shim's own binary bound read-only into the sandbox's `/dev` (a tmpfs there, so
//! nothing is written to the image's snapshot).

use oci_spec::runtime::{Mount, Spec};
use std::path::Path;

use super::{Error, Result};

/// Where the pause program appears inside the sandbox.
pub const PAUSE_PATH: &str = "/dev/.podinit-pause";

/// The sandbox's process becomes `exe`'s pause, bound in from the host.
pub fn with_podinit_pause(spec: &mut Spec, exe: &Path) -> Result<()> {
    let process = spec
        .process_mut()
        .as_mut()
        .ok_or_else(|| Error::Invalid("the sandbox's config.json has no process".into()))?;
    process.set_args(Some(vec![PAUSE_PATH.into(), "pause".into()]));
    process.set_terminal(Some(false));
    let mounts = spec.mounts_mut().get_or_insert_with(Vec::new);
    if !mounts.iter().any(|m| m.destination() == Path::new("/dev")) {
        return Err(Error::Invalid(
            "the sandbox's config.json mounts nothing on /dev".into(),
        ));
    }
    let mut m = Mount::default();
    m.set_destination(PAUSE_PATH.into());
    m.set_typ(Some("bind".into()));
    m.set_source(Some(exe.to_path_buf()));
    m.set_options(Some(
        ["bind", "ro", "nosuid", "nodev"].map(String::from).to_vec(),
    ));
    mounts.push(m);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(v: serde_json::Value) -> Spec {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn the_sandbox_runs_podinit_pause_bound_into_its_dev() {
        let mut s = spec(serde_json::json!({
            "ociVersion": "1.0.2",
            "process": {"args": ["/pause"], "terminal": true, "cwd": "/", "user": {"uid": 0, "gid": 0}},
            "mounts": [{"destination": "/dev", "type": "tmpfs", "source": "tmpfs"}]
        }));
        with_podinit_pause(&mut s, Path::new("/usr/bin/containerd-shim-podinit-v1")).unwrap();
        let p = s.process().as_ref().unwrap();
        assert_eq!(p.args().as_ref().unwrap(), &[PAUSE_PATH, "pause"]);
        assert_eq!(p.terminal(), Some(false));
        let last = s.mounts().as_ref().unwrap().last().unwrap();
        assert_eq!(last.destination(), Path::new(PAUSE_PATH));
        assert_eq!(
            last.source().as_deref(),
            Some(Path::new("/usr/bin/containerd-shim-podinit-v1"))
        );
    }

    #[test]
    fn a_sandbox_without_dev_or_process_is_refused() {
        let mut s = spec(serde_json::json!({
            "ociVersion": "1.0.2",
            "process": {"args": ["/pause"], "cwd": "/", "user": {"uid": 0, "gid": 0}},
            "mounts": []
        }));
        let e = with_podinit_pause(&mut s, Path::new("/x"))
            .unwrap_err()
            .to_string();
        assert_eq!(e, "the sandbox's config.json mounts nothing on /dev");
        let mut s = spec(serde_json::json!({"ociVersion": "1.0.2"}));
        let e = with_podinit_pause(&mut s, Path::new("/x"))
            .unwrap_err()
            .to_string();
        assert_eq!(e, "the sandbox's config.json has no process");
    }
}
