//! The last step: exec the spec's program, looked up along PATH when it has no '/'.

use super::{Kernel, Never};
use crate::runtime::prepare::Prepared;

pub(super) fn exec<K: Kernel>(k: &K, p: &Prepared) -> Result<Never, String> {
    let mut argv: Vec<*const libc::c_char> = p.argv.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let mut envp: Vec<*const libc::c_char> = p.env.iter().map(|a| a.as_ptr()).collect();
    envp.push(std::ptr::null());
    let missing =
        |e: &std::io::Error| matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ENOTDIR));
    for cand in &p.exe_candidates {
        // A failed execve costs twice a failed access: look first along PATH.
        if p.exe_candidates.len() > 1 {
            if let Err(e) = k.access(cand) {
                if missing(&e) {
                    continue;
                }
            }
        }
        let e = k.execve(cand, &argv, &envp);
        // Keep looking along PATH only when this one does not exist.
        if !missing(&e) || p.exe_candidates.len() == 1 {
            return Err(format!("exec: {:?}: {e}", cand.to_string_lossy()));
        }
    }
    Err(format!(
        "exec: {:?}: executable file not found in $PATH",
        p.argv0
    ))
}
