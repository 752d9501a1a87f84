//! Starting a program with descriptors put where it expects them, by `posix_spawn(3)`:
//! glibc's runs the child on its parent's memory until the exec (a vfork). std's
//! `Command` forks instead as soon as a descriptor must be moved before the exec
//! (`pre_exec`), and the fork of a large multi-threaded parent copies its page tables for
//! the child's exec to tear down again: 0.9 ms of each container's Create in the shim
//! (BENCHMARKS.md, "One pod at a time on a settled node", 3).

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::spawn::{posix_spawn, PosixSpawnAttr, PosixSpawnFileActions, PosixSpawnFlags};
use nix::sys::signal::{SigSet, Signal};

/// A program to start: its path, its whole argv (argv[0] first), the variables set for
/// it on top of this process's environment, and the descriptors it gets, each as
/// `(ours, its number there)`.
pub struct Program<'a> {
    pub path: &'a Path,
    pub argv: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
    pub fds: Vec<(BorrowedFd<'a>, RawFd)>,
}

/// Starts `p`; its pid, for the caller to reap. It gets the descriptors `p` names and,
/// as with any exec, every other one of ours that is not close-on-exec. Its signal mask
/// is empty and SIGPIPE at its default, as `Command` leaves them.
pub fn spawn(p: &Program) -> io::Result<i32> {
    // Each descriptor is first copied above every target, so that no dup2 in the child
    // overwrites one still to be moved; the copies are close-on-exec and go with this call.
    let top = p.fds.iter().map(|f| f.1).max().unwrap_or(2).max(2) + 1;
    let copies = p
        .fds
        .iter()
        .map(|(fd, _)| super::fd::dup_above(fd, top))
        .collect::<io::Result<Vec<OwnedFd>>>()?;
    let mut actions = PosixSpawnFileActions::init()?;
    for (copy, (_, target)) in copies.iter().zip(&p.fds) {
        actions.add_dup2(copy.as_raw_fd(), *target)?;
    }
    let mut attr = PosixSpawnAttr::init()?;
    attr.set_flags(
        PosixSpawnFlags::POSIX_SPAWN_SETSIGMASK | PosixSpawnFlags::POSIX_SPAWN_SETSIGDEF,
    )?;
    attr.set_sigmask(&SigSet::empty())?;
    let mut default = SigSet::empty();
    default.add(Signal::SIGPIPE);
    attr.set_sigdefault(&default)?;
    let argv = p
        .argv
        .iter()
        .map(|a| c_string(a))
        .collect::<io::Result<Vec<_>>>()?;
    let env = environment(&p.env)?;
    let pid = posix_spawn(p.path, &actions, &attr, &argv, &env)?;
    Ok(pid.as_raw())
}

/// This process's environment with `set` on top, as `NAME=VALUE` strings.
fn environment(set: &[(OsString, OsString)]) -> io::Result<Vec<CString>> {
    std::env::vars_os()
        .filter(|(k, _)| !set.iter().any(|(s, _)| s == k))
        .chain(set.iter().cloned())
        .map(|(k, v)| {
            let mut kv = k;
            kv.push("=");
            kv.push(v);
            c_string(&kv)
        })
        .collect()
}

fn c_string(s: &OsStr) -> io::Result<CString> {
    CString::new(s.as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{s:?}: a NUL byte in an argument or variable"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::fd::AsFd;

    fn wait(pid: i32) -> i32 {
        let mut status = 0;
        // SAFETY: waitpid for a child this test spawned.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        libc::WEXITSTATUS(status)
    }

    #[test]
    fn a_program_gets_its_descriptors_where_it_wants_them_and_its_variables() {
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        let (r2, w2) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        // The second pipe's write end goes to 1 and the first's to 5: whatever numbers
        // they have here, neither overwrites the other in the child.
        let p = Program {
            path: Path::new("/bin/sh"),
            argv: [
                "sh",
                "-c",
                "echo \"$PODINIT_SPAWN_TEST\" >&5; grep SigIgn /proc/self/status",
            ]
            .map(OsString::from)
            .to_vec(),
            env: vec![("PODINIT_SPAWN_TEST".into(), "set".into())],
            fds: vec![(w.as_fd(), 5), (w2.as_fd(), 1)],
        };
        let pid = spawn(&p).unwrap();
        drop((w, w2));
        let (mut a, mut b) = (String::new(), String::new());
        std::fs::File::from(r).read_to_string(&mut a).unwrap();
        std::fs::File::from(r2).read_to_string(&mut b).unwrap();
        assert_eq!(wait(pid), 0);
        assert_eq!(a, "set\n");
        // SIGPIPE (13) at its default, where this test process ignores it.
        let ignored = u64::from_str_radix(b.trim().trim_start_matches("SigIgn:").trim(), 16)
            .unwrap_or_else(|e| panic!("{b:?}: {e}"));
        assert_eq!(ignored & 1 << (libc::SIGPIPE - 1), 0, "{b}");
    }

    #[test]
    fn an_argument_with_a_nul_byte_is_refused_before_anything_starts() {
        use std::os::unix::ffi::OsStringExt;
        let p = Program {
            path: Path::new("/bin/true"),
            argv: vec![OsString::from_vec(b"tr\0ue".to_vec())],
            env: Vec::new(),
            fds: Vec::new(),
        };
        let e = spawn(&p).unwrap_err().to_string();
        assert!(e.contains("a NUL byte"), "{e}");
    }
}
