//! The last step: exec the spec's program, looked up along PATH when it has no '/'.

use std::ffi::CStr;

use super::{Error, Kernel, Never};
use crate::runtime::prepare::Prepared;

/// The program to exec: `argv[0]` itself when it has a '/', else the first candidate along
/// PATH that exists.
pub(super) fn find<'p, K: Kernel>(k: &K, p: &'p Prepared) -> crate::runtime::Result<&'p CStr> {
    let missing =
        |e: &std::io::Error| matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ENOTDIR));
    if let [only] = p.exe_candidates.as_slice() {
        // As runc's LookPath: a missing program is a create-time error, not an exec
        // failure after start.
        if p.standalone.is_some() {
            if let Err(e) = k.access(only) {
                if missing(&e) {
                    let why = if e.raw_os_error() == Some(libc::ENOTDIR) {
                        "not a directory"
                    } else {
                        "no such file or directory"
                    };
                    return Err(Error::Start(format!(
                        "exec: {:?}: stat {}: {why}",
                        p.argv0,
                        only.to_string_lossy()
                    )));
                }
            }
        }
        return Ok(only);
    }
    for cand in &p.exe_candidates {
        match k.access(cand) {
            Err(e) if missing(&e) => continue,
            _ => return Ok(cand),
        }
    }
    Err(Error::Start(format!(
        "exec: {:?}: executable file not found in $PATH",
        p.argv0
    )))
}

/// `HOME=<dir>` of `uid` in the container's /etc/passwd, `HOME=/` without an entry.
fn home_of<K: Kernel>(k: &K, uid: u32) -> std::ffi::CString {
    let passwd = k
        .read_file(std::path::Path::new("/etc/passwd"))
        .unwrap_or_default();
    let dir = String::from_utf8_lossy(&passwd)
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .find(|f| f.len() >= 6 && f[2].parse() == Ok(uid))
        .map(|f| f[5].to_string())
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| "/".into());
    std::ffi::CString::new(format!("HOME={dir}")).unwrap_or_default()
}

pub(super) fn exec<K: Kernel>(k: &K, p: &Prepared, exe: &CStr) -> crate::runtime::Result<Never> {
    let mut argv: Vec<*const libc::c_char> = p.argv.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let mut envp: Vec<*const libc::c_char> = p.env.iter().map(|a| a.as_ptr()).collect();
    let home = p.default_home.then(|| home_of(k, p.uid));
    if let Some(h) = &home {
        envp.push(h.as_ptr());
    }
    envp.push(std::ptr::null());
    let e = k.execve(exe, &argv, &envp);
    Err(Error::os(format!("exec: {:?}", exe.to_string_lossy()), e))
}
