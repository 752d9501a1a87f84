//! mount(2) and umount2(2) on paths, with the errno as an `io::Error` for the caller to
//! put in context. Paths reach the kernel through nix's stack buffers: no allocation on
//! the container start path.

use std::io;
use std::path::Path;

use nix::mount::{MntFlags, MsFlags};

/// `mount(src, target, fstype, flags, data)`; an empty `data` is passed as none.
pub fn mount(
    src: Option<&Path>,
    target: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: &str,
) -> io::Result<()> {
    nix::mount::mount(
        src,
        target,
        fstype,
        MsFlags::from_bits_retain(flags),
        (!data.is_empty()).then_some(data),
    )
    .map_err(io::Error::from)
}

/// `umount2(target, MNT_DETACH)`: lazily, whatever still uses it.
pub fn detach(target: &Path) -> io::Result<()> {
    nix::mount::umount2(target, MntFlags::MNT_DETACH).map_err(io::Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn a_nul_in_a_path_is_refused_before_the_call() {
        let bad = Path::new(std::ffi::OsStr::from_bytes(b"/a\0b"));
        let e = mount(None, bad, None, 0, "").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(detach(bad).unwrap_err().kind(), io::ErrorKind::InvalidInput);
    }
}
