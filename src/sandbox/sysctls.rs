//! Setting the pod's sysctls. All of them are namespaced (net: the pod's network namespace;
//! ipc: its IPC namespace), so the supervisor, which lives in both, sets them once for
//! every container. Which ones are allowed is `pod::sysctls`.

use crate::pod::sysctls::normalize;

/// Set them through /proc/sys (the supervisor's view of its namespaces).
pub fn apply(sysctls: &[(String, String)]) -> Result<(), String> {
    for (name, value) in sysctls {
        let path = std::path::Path::new("/proc/sys").join(normalize(name).replace('.', "/"));
        std::fs::write(&path, value).map_err(|e| format!("setting sysctl {name}={value}: {e}"))?;
    }
    Ok(())
}
