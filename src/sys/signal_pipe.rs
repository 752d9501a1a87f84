//! Signals as readable bytes for an event loop (the supervisor's, the outer process's
//! relay): each handled signal writes its number into a non-blocking pipe that the loop
//! polls (the self-pipe trick; no thread, nothing lost while the loop is busy, since a
//! pending byte stays until read).

use signal_hook::SigId;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

pub struct SignalPipe {
    read: OwnedFd,
    _write: OwnedFd,
    ids: Vec<SigId>,
}

impl SignalPipe {
    /// Handle `signals` from now on. PID 1 of a namespace gets no signal it has no handler
    /// for, so the supervisor installs one for each signal it wants to see.
    pub fn install(signals: &[i32]) -> io::Result<SignalPipe> {
        let (read, write) =
            nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK)
                .map_err(io::Error::from)?;
        let wfd: RawFd = write.as_raw_fd();
        let mut ids = Vec::new();
        for &sig in signals {
            let byte = sig as u8;
            // SAFETY: the handler only calls write(2), which is async-signal-safe, on an fd
            // that lives as long as the registration (both are dropped together).
            let id = unsafe {
                signal_hook::low_level::register(sig, move || {
                    let saved = *libc::__errno_location();
                    libc::write(wfd, &byte as *const u8 as *const libc::c_void, 1);
                    *libc::__errno_location() = saved;
                })
            }?;
            ids.push(id);
        }
        Ok(SignalPipe {
            read,
            _write: write,
            ids,
        })
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.read.as_fd()
    }

    /// The signals received since the last call, in arrival order (repeats kept: a second
    /// SIGTERM means "force").
    pub fn drain(&self) -> Vec<i32> {
        let mut out = Vec::new();
        let mut buf = [0u8; 64];
        while let Ok(n) = nix::unistd::read(&self.read, &mut buf) {
            if n == 0 {
                break;
            }
            out.extend(buf[..n].iter().map(|&b| b as i32));
        }
        out
    }
}

impl Drop for SignalPipe {
    fn drop(&mut self) {
        for id in self.ids.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}
