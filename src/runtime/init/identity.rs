//! Who the container's process is: supplementary groups, gid, uid and capabilities.

use super::{Error, Kernel, R};
use crate::runtime::prepare::Prepared;

/// The bounding set narrows while we are still root (it needs CAP_SETPCAP); the other sets
/// are set after the uid change, which PR_SET_KEEPCAPS lets the permitted set survive;
/// no_new_privs comes last, once nothing needs privileges any more.
pub(super) fn credentials<K: Kernel>(k: &K, p: &Prepared) -> R {
    k.drop_bounding(&p.caps)?;
    match k.setgroups(&p.groups) {
        // A user namespace whose gid map an unprivileged user wrote has setgroups denied
        // (a rootless runc bundle): the process keeps the groups it has, as runc does.
        Err(e) if e.raw_os_error() == Some(libc::EPERM) && setgroups_denied() => {}
        r => r.map_err(|e| Error::os("setgroups", e))?,
    }
    k.keep_caps(true)
        .map_err(|e| Error::os("PR_SET_KEEPCAPS", e))?;
    k.setresgid(p.gid)
        .map_err(|e| Error::os(format!("setresgid {}", p.gid), e))?;
    k.setresuid(p.uid)
        .map_err(|e| Error::os(format!("setresuid {}", p.uid), e))?;
    k.keep_caps(false)
        .map_err(|e| Error::os("PR_SET_KEEPCAPS", e))?;
    k.set_caps(&p.caps)?;
    if p.no_new_privs {
        k.no_new_privs()
            .map_err(|e| Error::os("PR_SET_NO_NEW_PRIVS", e))?;
    }
    Ok(())
}

/// Whether this user namespace denies setgroups(2) (`/proc/self/setgroups` says `deny`),
/// read through a private procfs (`sys::procfs`), as every file under /proc the set-up uses.
fn setgroups_denied() -> bool {
    crate::sys::procfs::read(std::path::Path::new("/proc/self/setgroups"))
        .is_ok_and(|t| t.trim_ascii() == b"deny")
}
