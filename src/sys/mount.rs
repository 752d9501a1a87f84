//! mount(2) and umount2(2) on paths, with the errno as an `io::Error` for the caller to
//! put in context.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// A path as a C string; a NUL byte in it is an error, not a truncation.
pub fn c_path(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{:?} contains a NUL byte", p.display().to_string()),
        )
    })
}

/// `mount(src, target, fstype, flags, data)`; an empty `data` is passed as none.
pub fn mount(
    src: Option<&Path>,
    target: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: &str,
) -> io::Result<()> {
    let src_c = src.map(c_path).transpose()?;
    let target_c = c_path(target)?;
    let fs_c = fstype.map(|f| CString::new(f).unwrap_or_default());
    let data_c = CString::new(data).unwrap_or_default();
    // SAFETY: valid NUL-terminated strings or null pointers, as mount(2) takes them.
    let rc = unsafe {
        libc::mount(
            src_c.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
            target_c.as_ptr(),
            fs_c.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
            flags,
            if data.is_empty() {
                std::ptr::null()
            } else {
                data_c.as_ptr().cast()
            },
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `umount2(target, MNT_DETACH)`: lazily, whatever still uses it.
pub fn detach(target: &Path) -> io::Result<()> {
    let c = c_path(target)?;
    // SAFETY: umount2 with a valid C string.
    if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nul_in_a_path_is_refused_before_the_call() {
        let bad = Path::new(std::ffi::OsStr::from_bytes(b"/a\0b"));
        let e = mount(None, bad, None, 0, "").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("NUL"), "{e}");
    }
}
