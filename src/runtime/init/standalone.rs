//! The steps only a container of its own takes (`runtime::container`), in the order runc's
//! init takes them: wait for the creator, then UTS names and keyring, hooks before the
//! root is switched, and at the end "ready" and the exec fifo before exec.
//!
//! The messages on the sync socket are `runtime::sync::Sync`.

use std::os::fd::RawFd;

use super::{Error, Kernel, R};
use crate::runtime::prepare::{Prepared, Standalone};
use crate::runtime::sync::Sync;

/// The OCI state JSON the container's own hooks get: at createContainer and at
/// startContainer.
pub struct States {
    pub creating: String,
    pub created: String,
}

pub(super) fn wait_for_go<K: Kernel>(
    k: &K,
    s: &Standalone,
    keep_fds: u32,
) -> crate::runtime::Result<States> {
    k.close_fds_except(3 + keep_fds, &s.keep);
    if let Some(fd) = s.user_ns {
        k.setns(fd, libc::CLONE_NEWUSER)
            .map_err(|e| Error::os("joining the user namespace", e))?;
    }
    let msg = k
        .sync_recv(s.sync)
        .map_err(|e| Error::os("waiting for the creating process", e))?;
    let Some(Sync::Go { creating, created }) = Sync::decode(&msg) else {
        return Err(Error::Setup(
            "the creating process went away before the container was set up".into(),
        ));
    };
    if s.become_root {
        k.setresgid(0)
            .map_err(|e| Error::os("becoming root in the user namespace (setresgid 0)", e))?;
        k.setresuid(0)
            .map_err(|e| Error::os("becoming root in the user namespace (setresuid 0)", e))?;
    }
    Ok(States { creating, created })
}

pub(super) fn uts_and_keyring<K: Kernel>(k: &K, p: &Prepared) -> R {
    if let Some(h) = &p.hostname {
        k.set_hostname(h)
            .map_err(|e| Error::os(format!("sethostname {:?}", h.to_string_lossy()), e))?;
    }
    if let Some(d) = &p.domainname {
        k.set_domainname(d)
            .map_err(|e| Error::os(format!("setdomainname {:?}", d.to_string_lossy()), e))?;
    }
    if let Some(name) = p.standalone.as_ref().and_then(|s| s.keyring.as_ref()) {
        // A kernel without keyrings, or one that denies them (as in some user
        // namespaces), leaves the container the caller's keyring, as runc does.
        match k.join_keyring(name) {
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS) | Some(libc::EACCES)) => {}
            r => r.map_err(|e| Error::os("joining a session keyring", e))?,
        }
    }
    Ok(())
}

/// The mounts are made and the root not yet switched: the creator's hooks (prestart,
/// createRuntime) run now, then the container's createContainer hooks, here.
pub(super) fn before_pivot<K: Kernel>(k: &K, s: &Standalone, st: &States) -> R {
    if s.runtime_hooks {
        k.sync_send(s.sync, &Sync::Hooks.encode())
            .map_err(|e| Error::os("asking for the runtime hooks", e))?;
        let answer = k
            .sync_recv(s.sync)
            .map_err(|e| Error::os("waiting for the runtime hooks", e))?;
        if Sync::decode(&answer) != Some(Sync::Continue) {
            return Err(Error::Setup(
                "the creating process went away during the runtime hooks".into(),
            ));
        }
    }
    k.run_hooks("createContainer", &s.create_container_hooks, &st.creating)
}

/// Everything is set up: tell the creator, wait at the exec fifo until `start`, and run
/// the startContainer hooks.
pub(super) fn ready_and_wait<K: Kernel>(k: &K, s: &Standalone, st: &States) -> R {
    k.sync_send(s.sync, &Sync::Ready.encode())
        .map_err(|e| Error::os("reporting ready", e))?;
    k.pass_gate(s.fifo)
        .map_err(|e| Error::os("waiting at the exec fifo", e))?;
    k.run_hooks("startContainer", &s.start_container_hooks, &st.created)
}

/// A failure: to the creator while it waits, else (after "ready", when `start` released
/// us) on the container's stderr, where `run` and the shim's logs show it.
pub(super) fn report(sync: RawFd, err: &str) {
    let msg = Sync::Failed(err.to_string()).encode();
    if crate::sys::packet::send(sync, &msg).is_err() {
        let line = format!("podinit-runc: {err}\n");
        // SAFETY: a write to our stderr.
        unsafe { libc::write(2, line.as_ptr().cast(), line.len()) };
    }
}
