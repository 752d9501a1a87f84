//! File system calls the standard library and nix lack.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Set extended attribute `key` of `path` itself (a symlink's own, not its target's).
pub fn lsetxattr(path: &Path, key: &str, value: &[u8]) -> io::Result<()> {
    let p = CString::new(path.as_os_str().as_bytes())?;
    let k = CString::new(key)?;
    // SAFETY: both strings are NUL-terminated and live across the call; value's length is
    // passed with it.
    let r = unsafe {
        libc::lsetxattr(
            p.as_ptr(),
            k.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
