//! Who the container's process is: supplementary groups, gid, uid and capabilities.

use super::{Kernel, R};
use crate::runtime::prepare::Prepared;

/// The bounding set narrows while we are still root (it needs CAP_SETPCAP); the other sets
/// are set after the uid change, which PR_SET_KEEPCAPS lets the permitted set survive;
/// no_new_privs comes last, once nothing needs privileges any more.
pub(super) fn credentials<K: Kernel>(k: &K, p: &Prepared) -> R {
    k.drop_bounding(&p.caps)?;
    k.setgroups(&p.groups)
        .map_err(|e| format!("setgroups: {e}"))?;
    k.keep_caps(true)
        .map_err(|e| format!("PR_SET_KEEPCAPS: {e}"))?;
    k.setresgid(p.gid)
        .map_err(|e| format!("setresgid {}: {e}", p.gid))?;
    k.setresuid(p.uid)
        .map_err(|e| format!("setresuid {}: {e}", p.uid))?;
    k.keep_caps(false)
        .map_err(|e| format!("PR_SET_KEEPCAPS: {e}"))?;
    k.set_caps(&p.caps)?;
    if p.no_new_privs {
        k.no_new_privs()
            .map_err(|e| format!("PR_SET_NO_NEW_PRIVS: {e}"))?;
    }
    Ok(())
}
