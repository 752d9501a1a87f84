//! Setting the pod's sysctls. All of them are namespaced (net: the pod's network namespace;
//! ipc: its IPC namespace), so the supervisor, which lives in both, sets them once for
//! every container. Which ones are allowed is `pod::sysctls`.

use crate::pod::sysctls::normalize;

/// Set them through /proc/sys (the supervisor's view of its namespaces), reached through a
/// private procfs (`sys::procfs`): a container that can mount in the pod's mount namespace
/// cannot redirect these writes by covering the supervisor's /proc.
pub fn apply(sysctls: &[(String, String)]) -> Result<(), super::Error> {
    use super::Error;
    if sysctls.is_empty() {
        return Ok(());
    }
    let proc = crate::sys::procfs::ProcRoot::open().map_err(|e| Error::io("opening procfs", e))?;
    for (name, value) in sysctls {
        let path = std::path::Path::new("/proc/sys").join(normalize(name).replace('.', "/"));
        proc.write(&path, value.as_bytes())
            .map_err(|e| Error::io(format_args!("setting sysctl {name}={value}"), e))?;
    }
    Ok(())
}
