//! Creating processes: `clone3(2)` fork-like and vfork-like, each child with a pidfd and,
//! on cgroup v2, born in its cgroup.

use std::io;

/// The child's signal handlers are reset to the default by the kernel (libc has no name
/// for the flag yet): none of its parent's can run in it.
pub const CLONE_CLEAR_SIGHAND: u64 = 0x1_0000_0000;

/// The result of [`clone3`] in the parent.
pub struct Cloned {
    pub pid: i32,
    pub pidfd: std::os::fd::OwnedFd,
}

/// `clone3(2)` with `CLONE_PIDFD` and the given namespace flags, fork-like (no new stack):
/// returns `Ok(None)` in the child and `Ok(Some(..))` in the parent. With `cgroup` (a v2
/// cgroup directory), the child is born in that cgroup (`CLONE_INTO_CGROUP`).
///
/// # Safety
/// The caller must be single-threaded (as the supervisor and the outer process are), for
/// the same reasons as `fork`: the child may only rely on state no other thread held.
pub unsafe fn clone3(
    flags: u64,
    cgroup: Option<std::os::fd::BorrowedFd>,
) -> io::Result<Option<Cloned>> {
    let mut pidfd: libc::c_int = -1;
    let mut args = CloneArgs::new(flags, cgroup, &mut pidfd);
    let rc = libc::syscall(
        libc::SYS_clone3,
        &mut args as *mut CloneArgs,
        std::mem::size_of::<CloneArgs>(),
    );
    match rc {
        -1 => Err(io::Error::last_os_error()),
        0 => Ok(None),
        pid => Ok(Some(Cloned {
            pid: pid as i32,
            pidfd: std::os::fd::FromRawFd::from_raw_fd(pidfd),
        })),
    }
}

/// [`clone3`] for a caller that must be single-threaded (the outer process, the
/// supervisor), checked first: with another thread running it fails and clones nothing.
pub fn fork(flags: u64, cgroup: Option<std::os::fd::BorrowedFd>) -> io::Result<Option<Cloned>> {
    single_threaded("clone3")?;
    // SAFETY: this is the only thread, and only it could start another.
    unsafe { clone3(flags, cgroup) }
}

/// An error naming `what` unless this process runs one thread only: what a fork-like
/// clone needs, since its child may rely only on state no other thread held.
pub fn single_threaded(what: &str) -> io::Result<()> {
    let threads = procfs::process::Process::myself()
        .and_then(|p| p.stat())
        .map_err(|e| io::Error::other(format!("reading /proc/self/stat: {e}")))?
        .num_threads;
    if threads != 1 {
        return Err(io::Error::other(format!(
            "{what} refused: {threads} threads run, a fork-like clone needs one"
        )));
    }
    Ok(())
}

/// `struct clone_args` of clone3(2).
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

impl CloneArgs {
    /// `flags` with `CLONE_PIDFD` (the pidfd lands in `pidfd`), SIGCHLD at exit (with
    /// `CLONE_PARENT` the caller's own exit signal, which clone3 wants left 0), and
    /// `CLONE_INTO_CGROUP` when `cgroup` is given.
    fn new(
        flags: u64,
        cgroup: Option<std::os::fd::BorrowedFd>,
        pidfd: &mut libc::c_int,
    ) -> CloneArgs {
        const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;
        let mut args = CloneArgs {
            flags: flags | libc::CLONE_PIDFD as u64,
            pidfd: pidfd as *mut libc::c_int as u64,
            exit_signal: if flags & libc::CLONE_PARENT as u64 != 0 {
                0
            } else {
                libc::SIGCHLD as u64
            },
            ..Default::default()
        };
        if let Some(fd) = cgroup {
            args.flags |= CLONE_INTO_CGROUP;
            args.cgroup = std::os::fd::AsRawFd::as_raw_fd(&fd) as u64;
        }
        args
    }
}

/// [`clone3`] as `vfork` (`CLONE_VM | CLONE_VFORK`), the way posix_spawn starts a process:
/// the child runs `child(arg)` on a stack of its own, in our memory, while this thread
/// waits; it resumes when the child has called execve or exited. No page tables are
/// copied and no page is copied on write after, for a process that replaces itself at
/// once: each container start, and each exec probe, every period in every container.
///
/// # Safety
/// Single-threaded caller. `child` must end in execve or `_exit` without returning, must
/// not free or move anything it did not allocate (it shares our heap), and must not wait
/// for anything only this process could do (we are stopped until it execs). `arg` must
/// stay valid until this returns.
pub unsafe fn clone3_vfork(
    flags: u64,
    cgroup: Option<std::os::fd::BorrowedFd>,
    child: extern "C" fn(*mut libc::c_void) -> !,
    arg: *mut libc::c_void,
) -> io::Result<Cloned> {
    static STACK_BASE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    clone3_vfork_on(&STACK_BASE, flags, cgroup, child, arg)
}

/// [`clone3_vfork`] called by a vfork-like child itself (which runs on the first stack):
/// its own child gets a second stack.
///
/// # Safety
/// As [`clone3_vfork`], from a vfork-like child of it only.
pub unsafe fn clone3_vfork_nested(
    flags: u64,
    child: extern "C" fn(*mut libc::c_void) -> !,
    arg: *mut libc::c_void,
) -> io::Result<Cloned> {
    static STACK_BASE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    clone3_vfork_on(&STACK_BASE, flags, None, child, arg)
}

unsafe fn clone3_vfork_on(
    stack_base: &std::sync::OnceLock<usize>,
    flags: u64,
    cgroup: Option<std::os::fd::BorrowedFd>,
    child: extern "C" fn(*mut libc::c_void) -> !,
    arg: *mut libc::c_void,
) -> io::Result<Cloned> {
    // One stack for every child: we wait for each before the next. Mapped once, on first
    // use; the pages a child touched stay ours. A guard page below it: a child that
    // overflowed it would otherwise write into whatever of ours is mapped there.
    const STACK: usize = 256 << 10;
    const GUARD: usize = 4096;
    let base = match stack_base.get() {
        Some(&b) => b,
        None => {
            let p = libc::mmap(
                std::ptr::null_mut(),
                GUARD + STACK,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            );
            if p == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            if libc::mprotect(p, GUARD, libc::PROT_NONE) != 0 {
                let e = io::Error::last_os_error();
                libc::munmap(p, GUARD + STACK);
                return Err(e);
            }
            *stack_base.get_or_init(|| p as usize + GUARD)
        }
    };
    let mut pidfd: libc::c_int = -1;
    let mut args = CloneArgs::new(
        flags | (libc::CLONE_VM | libc::CLONE_VFORK) as u64,
        cgroup,
        &mut pidfd,
    );
    args.stack = base as u64;
    args.stack_size = STACK as u64;
    let rc: i64;
    // The child returns from the syscall on the new stack, where no frame of ours
    // exists: it calls `child` right there, as glibc's clone does. r12 and r13 survive
    // the syscall in both processes.
    std::arch::asm!(
        "syscall",
        "test rax, rax",
        "jnz 2f",
        "xor ebp, ebp",
        "mov rdi, r13",
        "call r12",
        "ud2",
        "2:",
        inlateout("rax") libc::SYS_clone3 => rc,
        in("rdi") &mut args as *mut CloneArgs,
        in("rsi") std::mem::size_of::<CloneArgs>(),
        in("r12") child,
        in("r13") arg,
        lateout("rcx") _,
        lateout("r11") _,
    );
    if rc < 0 {
        return Err(io::Error::from_raw_os_error(-rc as i32));
    }
    Ok(Cloned {
        pid: rc as i32,
        pidfd: std::os::fd::FromRawFd::from_raw_fd(pidfd),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// vfork children share one stack: the tests that make them take turns (the test
    /// harness runs tests on parallel threads).
    static VFORK: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn wait_status(c: &Cloned) -> i32 {
        let mut status = 0;
        // SAFETY: waiting for our own child.
        assert_eq!(unsafe { libc::waitpid(c.pid, &mut status, 0) }, c.pid);
        status
    }

    extern "C" fn exits_with(arg: *mut libc::c_void) -> ! {
        // SAFETY: the test passes an i32 that outlives the call.
        let code = unsafe { *(arg as *const i32) };
        // SAFETY: ending the vfork child.
        unsafe { libc::_exit(code) }
    }

    extern "C" fn execs_true(_: *mut libc::c_void) -> ! {
        let argv = [c"/bin/true".as_ptr(), std::ptr::null()];
        let envp = [std::ptr::null()];
        // SAFETY: NUL-terminated arrays of C strings.
        unsafe {
            libc::execve(argv[0], argv.as_ptr(), envp.as_ptr());
            libc::_exit(127)
        }
    }

    /// The parent resumes when its vfork-like child exits or execs, with a pidfd for it.
    #[test]
    fn a_vfork_child_runs_on_its_own_stack() {
        let _one = VFORK.lock();
        let mut code = 7i32;
        // SAFETY: the child only reads `code` and exits.
        let c =
            unsafe { clone3_vfork(0, None, exits_with, &mut code as *mut i32 as *mut _) }.unwrap();
        assert!(c.pid > 0);
        let s = wait_status(&c);
        assert!(libc::WIFEXITED(s) && libc::WEXITSTATUS(s) == 7, "{s:#x}");
        // SAFETY: the child only execs.
        let c = unsafe { clone3_vfork(0, None, execs_true, std::ptr::null_mut()) }.unwrap();
        let s = wait_status(&c);
        assert!(libc::WIFEXITED(s) && libc::WEXITSTATUS(s) == 0, "{s:#x}");
    }

    /// Deeper than the vfork stack: 64 frames of 8 KiB.
    fn deep(n: u32) -> u8 {
        let frame = std::hint::black_box([n as u8; 8192]);
        if n == 0 {
            return frame[0];
        }
        deep(n - 1).wrapping_add(std::hint::black_box(frame)[100])
    }

    extern "C" fn overflows(_: *mut libc::c_void) -> ! {
        let v = deep(64);
        // SAFETY: ending the vfork child (not reached: the guard page stops it first).
        unsafe { libc::_exit(v as i32) }
    }

    #[test]
    fn a_vfork_child_that_overflows_its_stack_dies_on_the_guard_page() {
        let _one = VFORK.lock();
        let before = std::hint::black_box(vec![42u8; 4096]);
        // SAFETY: the child only recurses.
        let c = unsafe { clone3_vfork(0, None, overflows, std::ptr::null_mut()) }.unwrap();
        let s = wait_status(&c);
        assert!(
            libc::WIFSIGNALED(s) && libc::WTERMSIG(s) == libc::SIGSEGV,
            "{s:#x}"
        );
        assert!(before.iter().all(|&b| b == 42));
    }
}
