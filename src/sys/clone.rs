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
        0 => {
            // A copy of our memory: if we are a vfork-like child, glibc's heap in the copy is
            // as our waiting parent left it, and the copy's own again.
            super::child_heap::forked();
            Ok(None)
        }
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
/// The child's allocations come from an arena of its own (`child_heap`), emptied when this
/// returns: it may allocate, and be killed at any instruction, without touching our heap.
///
/// # Safety
/// Single-threaded caller. `child` must end in execve or `_exit` without returning, must
/// not free or move anything it did not allocate (it shares our memory), must leave in
/// memory we read afterwards nothing it allocated (the arena is emptied), and must not
/// wait for anything only this process could do (we are stopped until it execs). `arg`
/// must stay valid until this returns.
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
    // From here until the clone returns nothing of ours allocates: the child's allocations
    // are the arena's, and the guard empties it once we resume.
    let _heap = super::child_heap::enter()?;
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

    /// vfork children share one stack and one heap arena: the tests that make them take
    /// turns (the test harness runs tests on parallel threads).
    use crate::sys::child_heap::TEST_LOCK as VFORK;

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

    /// Runs `f` in a forked child, single-threaded as the supervisor is, and returns its
    /// wait status: what glibc's heap checks abort (or a lock left held hangs) is that
    /// process's, reported here, not the test harness's. Bounded: a child still running
    /// after two minutes is killed and reported so.
    fn in_subprocess(f: fn()) -> i32 {
        // glibc's fork, not a bare clone3: the harness's other threads may hold an arena's
        // lock at that instant, and only fork's handlers take and release every one, which
        // `mallinfo2` and `malloc_trim` in the child then lock in turn.
        // SAFETY: the child only runs `f` and exits.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork: {}", io::Error::last_os_error());
        if pid == 0 {
            let ok = std::panic::catch_unwind(f).is_ok();
            // SAFETY: ending the test's child without the harness's exit handlers.
            unsafe { libc::_exit(if ok { 0 } else { 101 }) }
        }
        // SAFETY: a pidfd for our own child, which stays a zombie until we reap it.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as libc::c_int;
        assert!(fd >= 0, "pidfd_open: {}", io::Error::last_os_error());
        // SAFETY: the fd was just opened and is ours alone.
        let c = Cloned {
            pid,
            pidfd: unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) },
        };
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd on our child's pidfd.
        if unsafe { libc::poll(&mut pfd, 1, 120_000) } != 1 {
            // SAFETY: our own child.
            unsafe { libc::kill(c.pid, libc::SIGKILL) };
            wait_status(&c);
            panic!("the test's process hung for two minutes (a heap lock left held?)");
        }
        wait_status(&c)
    }

    /// Dies of SIGKILL after `arg` nanoseconds of its own CPU time, spent allocating and
    /// freeing as a container's set-up does (and as glibc's heap would, without the arena,
    /// be left half-written by).
    extern "C" fn allocates_until_killed(arg: *mut libc::c_void) -> ! {
        let ns = arg as usize as libc::c_long;
        // SAFETY: a zeroed sigevent, then the fields of SIGEV_SIGNAL.
        let mut ev: libc::sigevent = unsafe { std::mem::zeroed() };
        ev.sigev_notify = libc::SIGEV_SIGNAL;
        ev.sigev_signo = libc::SIGKILL;
        let mut timer: libc::c_int = 0;
        let when = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: 0,
                tv_nsec: ns,
            },
        };
        // SAFETY: the raw system calls (no libc wrapper state): a timer on our own CPU
        // clock that sends SIGKILL once.
        unsafe {
            libc::syscall(
                libc::SYS_timer_create,
                libc::CLOCK_PROCESS_CPUTIME_ID,
                &mut ev,
                &mut timer,
            );
            libc::syscall(
                libc::SYS_timer_settime,
                timer,
                0,
                &when,
                std::ptr::null_mut::<u8>(),
            );
        }
        let mut held: Vec<String> = (0..32).map(|i| i.to_string()).collect();
        for i in 0..200_000usize {
            held[i % 32] = format!("{i:x}-{}", "x".repeat(i % 200));
            let mut v = Vec::with_capacity(i % 50);
            v.extend(std::iter::repeat_n(i as u8, i % 300));
            std::hint::black_box(&v);
        }
        // SAFETY: ending the vfork child (the timer did not fire in time).
        unsafe { libc::_exit(0) }
    }

    /// Allocates, frees and checks blocks of many sizes, the way glibc's heap finds a chunk
    /// a child left half-written, and walks its bins.
    fn churn_heap(round: usize) {
        let mut blocks: Vec<Vec<u8>> = Vec::new();
        for i in 0..400usize {
            let n = (i * 37 + round * 11) % 5000 + 1;
            blocks.push(vec![(i % 251) as u8; n]);
            if i % 3 == 0 {
                let gone = blocks.swap_remove((i * 7) % blocks.len());
                assert!(gone.iter().all(|&b| b == gone[0]));
            }
        }
        for b in &blocks {
            assert!(b.iter().all(|&x| x == b[0]), "a block changed under us");
        }
        drop(blocks);
        // SAFETY: single-threaded; trimming walks every free chunk.
        unsafe { libc::malloc_trim(0) };
    }

    /// A vfork-like child killed at any instruction of its allocations (a cgroup kill, the
    /// end of the pid namespace a probe joined) leaves our heap as we left it, and glibc's
    /// checks find nothing when we go on allocating.
    #[test]
    fn a_vfork_child_killed_while_allocating_leaves_our_heap_whole() {
        let _one = VFORK.lock();
        let status = in_subprocess(|| {
            let mut killed = 0;
            for round in 0..300usize {
                let ns = 2_000 + (round * 7919) % 300_000;
                // SAFETY: the child allocates (from the arena) and is killed or exits.
                let c =
                    unsafe { clone3_vfork(0, None, allocates_until_killed, ns as *mut _) }.unwrap();
                let s = wait_status(&c);
                if libc::WIFSIGNALED(s) && libc::WTERMSIG(s) == libc::SIGKILL {
                    killed += 1;
                }
                assert_eq!(crate::sys::child_heap::arena_in_use(), 0);
                churn_heap(round);
            }
            assert!(
                killed > 100,
                "only {killed} of 300 children were killed mid-way"
            );
        });
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "the parent's heap did not survive its children's kills: wait status {status:#x} \
             (signal {})",
            if libc::WIFSIGNALED(status) {
                libc::WTERMSIG(status)
            } else {
                0
            }
        );
    }

    extern "C" fn allocates_and_exits(_: *mut libc::c_void) -> ! {
        let kept: Vec<Vec<u8>> = (0..64).map(|i| vec![i as u8; 16 << 10]).collect();
        std::hint::black_box(&kept);
        std::mem::forget(kept);
        // SAFETY: ending the vfork child, its blocks still held, as exec leaves them.
        unsafe { libc::_exit(0) }
    }

    /// What a vfork-like child still holds when it execs or exits is not taken from our
    /// heap: glibc's heap counts the same bytes in use before and after.
    #[test]
    fn what_a_vfork_child_holds_at_its_end_costs_us_nothing() {
        let _one = VFORK.lock();
        let status = in_subprocess(|| {
            let before = crate::sys::pages::heap_in_use();
            for _ in 0..10 {
                // SAFETY: the child allocates (from the arena) and exits.
                let c = unsafe { clone3_vfork(0, None, allocates_and_exits, std::ptr::null_mut()) }
                    .unwrap();
                assert_eq!(wait_status(&c), 0);
            }
            let after = crate::sys::pages::heap_in_use();
            assert_eq!(after, before, "bytes in use in our heap");
        });
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "wait status {status:#x}"
        );
    }
}
