//! File descriptors: advisory locks, duplicates, and reads into kept buffers.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// `flock(2)` on `fd` with `how` (`libc::LOCK_EX`, `LOCK_SH`, `LOCK_UN`, with
/// `LOCK_NB`): the lock lives as long as the open file description.
pub fn flock(fd: BorrowedFd, how: libc::c_int) -> io::Result<()> {
    // SAFETY: flock on a descriptor the caller holds open.
    if unsafe { libc::flock(fd.as_raw_fd(), how) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A close-on-exec duplicate of `fd` numbered 3 or above, so that replacing stdio (0–2)
/// cannot close it.
pub fn dup_above_stdio(fd: BorrowedFd) -> io::Result<OwnedFd> {
    let new = nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_DUPFD_CLOEXEC(3))?;
    // SAFETY: fcntl just made this descriptor and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

/// Have the child that `cmd` spawns get `fd` as descriptor `target`, open across its
/// exec. `fd` must stay open until then (a closed one fails the spawn).
pub fn pass_as(cmd: &mut std::process::Command, fd: RawFd, target: RawFd) {
    use std::os::unix::process::CommandExt;
    // SAFETY: between fork and exec, only fcntl and dup2 on plain integers, which are
    // async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            if fd == target {
                let flags = libc::fcntl(fd, libc::F_GETFD);
                if flags < 0 || libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) < 0 {
                    return Err(io::Error::last_os_error());
                }
            } else if libc::dup2(fd, target) < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// A close-on-exec copy of `fd` numbered `min` or above, out of the way of the low
/// numbers a child is handed its descriptors at.
pub fn dup_above(fd: impl AsFd, min: RawFd) -> io::Result<OwnedFd> {
    let fd = fd.as_fd();
    // SAFETY: fcntl on a descriptor the caller holds open; the new fd returned is ours.
    let new = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, min) };
    if new < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

/// Take ownership of descriptor `fd` (below 64), which our parent passed us open: an
/// error when it is not open, or was taken already.
pub fn take_inherited(fd: RawFd) -> io::Result<OwnedFd> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static TAKEN: AtomicU64 = AtomicU64::new(0);
    if !(0..64).contains(&fd) {
        return Err(io::Error::other(format!("inherited fd {fd}: out of range")));
    }
    if TAKEN.fetch_or(1 << fd, Ordering::SeqCst) & 1 << fd != 0 {
        return Err(io::Error::other(format!(
            "inherited fd {fd}: taken already"
        )));
    }
    // SAFETY: F_GETFD only reads the descriptor's flags.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: open, passed to this process by its parent, and claimed here once only.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The bytes a pipe can still take, roughly (its pages hold what they hold); `None` when
/// `fd` is not a pipe.
pub fn pipe_free(fd: BorrowedFd) -> Option<usize> {
    let fd = fd.as_raw_fd();
    let mut queued: libc::c_int = 0;
    // SAFETY: fcntl with an integer result on a descriptor the caller holds.
    let cap = unsafe { libc::fcntl(fd, libc::F_GETPIPE_SZ) };
    // SAFETY: as above; FIONREAD writes one int, which `queued` is.
    let ok = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut queued) } == 0;
    (ok && cap > 0).then(|| (cap as usize).saturating_sub(queued.max(0) as usize))
}

/// `pread(2)` at `offset` into `buf`'s spare capacity, its length grown by what was read;
/// the bytes read. For a buffer kept between reads: nothing is zeroed first, which cost
/// more than the read for the small files of a cgroup read every second.
pub fn pread_append(fd: BorrowedFd, buf: &mut Vec<u8>, offset: u64) -> io::Result<usize> {
    let room = buf.spare_capacity_mut();
    // SAFETY: the kernel writes at most `room.len()` bytes into the spare capacity.
    let n = unsafe {
        libc::pread(
            fd.as_raw_fd(),
            room.as_mut_ptr().cast(),
            room.len(),
            offset as libc::off_t,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let n = n as usize;
    // SAFETY: `n` bytes after the length were written by the read.
    unsafe { buf.set_len(buf.len() + n) };
    Ok(n)
}
