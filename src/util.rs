//! Small helpers shared across modules: randomness, atomic files, wall-clock formatting.

use std::fs;
use std::io::{self, Write};
use std::path::Path;

/// `n` random bytes from the kernel: getrandom(2), one syscall and no file (a PID-1 podinit
/// may run where /dev has no urandom); never blocks after boot.
pub fn random_bytes(n: usize) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; n];
    let mut done = 0;
    while done < n {
        let rest = &mut buf[done..];
        // SAFETY: getrandom writes at most `rest.len()` bytes into `rest`.
        let r = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
            continue;
        }
        done += r as usize;
    }
    Ok(buf)
}

/// Lower-case hex of random bytes: container IDs (`podinit://<64 hex>`).
pub fn random_hex(bytes: usize) -> String {
    // getrandom can only fail on a kernel without it (before 3.17); fall back on time and
    // pid so IDs stay unique rather than failing a container start over it.
    let raw = random_bytes(bytes).unwrap_or_else(|_| {
        let seed = (std::process::id() as u128) << 64 | now_unix_nanos() as u128;
        (0..bytes)
            .map(|i| (seed >> ((i % 16) * 8)) as u8 ^ i as u8)
            .collect()
    });
    raw.iter().map(|b| format!("{b:02x}")).collect()
}

/// Write `data` to `path` atomically: a temporary file in the same directory, fsync-free
/// (status is rewritten often; a crash loses at most the last update), then rename.
pub fn write_atomic(path: &Path, data: &[u8]) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp"));
    // A write can fail half-way (ENOSPC, ENOMEM on a full tmpfs or memory cgroup): no
    // half-written file is left behind.
    fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(data))
        .and_then(|()| fs::rename(&tmp, path))
        .inspect_err(|_| {
            let _ = fs::remove_file(&tmp);
        })
}

/// Wall-clock nanoseconds since the Unix epoch.
pub fn now_unix_nanos() -> i128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i128)
        .unwrap_or(0)
}

/// RFC 3339 with nanoseconds, UTC (the CRI log format's timestamp).
pub fn rfc3339_nanos(unix_nanos: i128) -> String {
    let ts = k8s_openapi::jiff::Timestamp::from_nanosecond(unix_nanos)
        .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
    format!("{ts:.9}")
}

/// Signal name for messages (`SIGTERM`), or the number.
pub fn signal_name(sig: i32) -> String {
    nix::sys::signal::Signal::try_from(sig)
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|_| format!("signal {sig}"))
}

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
    /// `flags` with `CLONE_PIDFD` (the pidfd lands in `pidfd`), SIGCHLD at exit, and
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
            exit_signal: libc::SIGCHLD as u64,
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
/// copied and no page is copied on write after: for exec probes, which start a process
/// every period in every container, that was a third of the supervisor's CPU; for a
/// container start, 0.5 ms.
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
    // One stack for every child: we wait for each before the next. Mapped once, on first
    // use; the pages a child touched stay ours. A guard page below it: a child that
    // overflowed it would otherwise write into whatever of ours is mapped there.
    const STACK: usize = 256 << 10;
    const GUARD: usize = 4096;
    static STACK_BASE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    let base = match STACK_BASE.get() {
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
            *STACK_BASE.get_or_init(|| p as usize + GUARD)
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

/// `pidfd_send_signal(2)`: signal a process through its pidfd, immune to pid reuse.
pub fn pidfd_signal(pidfd: &std::os::fd::OwnedFd, sig: i32) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: plain syscall on an fd we own; no siginfo.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            sig,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `create_dir_all` for the common case in one syscall: mkdir, the parents only when
/// missing, an existing directory accepted (create_dir_all stats before every mkdir).
pub fn ensure_dir(path: &Path) -> io::Result<()> {
    match std::fs::create_dir(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => std::fs::create_dir_all(path),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && path.is_dir() => Ok(()),
        r => r,
    }
}

/// The longest path a `sockaddr_un` holds (108 bytes with the NUL).
const SUN_PATH_MAX: usize = 107;

/// A path that `bind` and `connect` accept for the Unix socket at `path`. One longer than
/// `sockaddr_un` holds (the default state dir of a pod with a long name) is reached through
/// an `O_PATH` descriptor of its directory, `/proc/self/fd/N/<name>`; keep the returned
/// file open while the path is used.
pub fn socket_path(path: &Path) -> io::Result<(Option<fs::File>, std::path::PathBuf)> {
    use std::os::unix::fs::OpenOptionsExt;
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Ok((None, path.to_path_buf()));
    };
    if path.as_os_str().len() <= SUN_PATH_MAX {
        return Ok((None, path.to_path_buf()));
    }
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let f = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(dir)?;
    use std::os::fd::AsRawFd;
    let short = Path::new(&format!("/proc/self/fd/{}", f.as_raw_fd())).join(name);
    Ok((Some(f), short))
}

/// Give back the memory of start-up work: drop this process's mappings of the executable's
/// read-only segments (code and constants) and return free heap to the kernel. Like the
/// kernel freeing its init sections once booted: the manifest loader, validation and the
/// container set-up code ran once; their pages stay in the page cache, shared with every
/// podinit, and whatever runs again is mapped back from there by a minor fault. Writable
/// and RELRO segments (relocated at start, so private copies) are not touched; the dead
/// part of the stack is dropped too.
pub fn release_startup_pages() {
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    unsafe extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: dl_iterate_phdr hands a valid info; `data` is the Vec below.
        let (info, ranges) = unsafe { (&*info, &mut *(data as *mut Vec<(usize, usize)>)) };
        // SAFETY: dlpi_phdr points at dlpi_phnum program headers.
        let phdrs = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
        let page = 4096;
        let relro = phdrs.iter().find(|p| p.p_type == libc::PT_GNU_RELRO);
        for p in phdrs
            .iter()
            .filter(|p| p.p_type == libc::PT_LOAD && p.p_flags & libc::PF_W == 0)
        {
            let start = (p.p_vaddr as usize).div_ceil(page) * page;
            let end = (p.p_vaddr + p.p_memsz) as usize / page * page;
            let overlaps_relro = relro.is_some_and(|r| {
                (r.p_vaddr as usize) < end && start < (r.p_vaddr + r.p_memsz) as usize
            });
            if start < end && !overlaps_relro {
                ranges.push((info.dlpi_addr as usize + start, end - start));
            }
        }
        1 // the executable comes first; what follows (the vDSO) is not ours
    }
    // SAFETY: the callback only reads the headers it is given.
    unsafe { libc::dl_iterate_phdr(Some(each), &mut ranges as *mut _ as *mut libc::c_void) };
    for (addr, len) in ranges {
        // SAFETY: read-only, file-backed mappings of our own executable: dropping them
        // loses nothing, the next access maps the same page again.
        unsafe { libc::madvise(addr as *mut libc::c_void, len, libc::MADV_DONTNEED) };
    }
    // On the main thread (the supervisor's and the outer process's only one), the stack
    // below us is dead: start-up went deeper (parsing, validation) than the event loop
    // does. 16 KiB are left for this call and any signal handler; below the main stack
    // lies the gap the kernel keeps free of mappings (at least 128 MiB), so the part of
    // the range that is not stack is nothing (madvise then says ENOMEM). Another thread's
    // stack may have neighbours: left alone.
    // SAFETY: plain syscalls without arguments.
    if unsafe { libc::gettid() == libc::getpid() } {
        let marker = 0u8;
        let here = std::hint::black_box(&marker) as *const u8 as usize;
        let top = (here - (16 << 10)) & !4095;
        // SAFETY: dead stack pages, refilled with zeros if ever used again.
        unsafe {
            libc::madvise(
                (top - (1 << 20)) as *mut libc::c_void,
                1 << 20,
                libc::MADV_DONTNEED,
            )
        };
    }
    // SAFETY: no other thread allocates during the call (glibc locks anyway).
    unsafe { libc::malloc_trim(0) };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The code, constants and relocated data stay usable after the release.
    #[test]
    fn a_long_socket_path_is_reached_through_its_directory() {
        let dir = std::env::temp_dir().join("x".repeat(120));
        fs::create_dir_all(&dir).unwrap();
        let sock = dir.join("s.sock");
        let (held, short) = socket_path(&sock).unwrap();
        assert!(
            held.is_some() && short.as_os_str().len() <= SUN_PATH_MAX,
            "{short:?}"
        );
        let l = std::os::unix::net::UnixListener::bind(&short).unwrap();
        assert!(sock.exists(), "the socket is made in the directory itself");
        let (_held, short) = socket_path(&sock).unwrap();
        std::os::unix::net::UnixStream::connect(&short).unwrap();
        drop(l);
        fs::remove_dir_all(&dir).unwrap();
        let (none, same) = socket_path(Path::new("/run/x.sock")).unwrap();
        assert!(none.is_none() && same == Path::new("/run/x.sock"));
    }

    #[test]
    fn code_runs_on_after_its_pages_are_given_back() {
        let before: Vec<String> = (0..100).map(|i| format!("{i:x}")).collect();
        release_startup_pages();
        let shown: Box<dyn std::fmt::Debug> = Box::new(before.clone());
        assert_eq!(format!("{shown:?}").len(), format!("{before:?}").len());
        assert_eq!(signal_name(libc::SIGTERM), "SIGTERM");
    }

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

    #[test]
    fn hex_ids_have_the_asked_length_and_differ() {
        let a = random_hex(32);
        let b = random_hex(32);
        assert_eq!(a.len(), 64);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }

    #[test]
    fn rfc3339_has_nanoseconds_and_utc() {
        assert_eq!(
            rfc3339_nanos(1_500_000_000_123_456_789),
            "2017-07-14T02:40:00.123456789Z"
        );
    }

    #[test]
    fn atomic_write_replaces_content() {
        let dir = std::env::temp_dir().join(format!("podinit-util-{}", random_hex(4)));
        fs::create_dir_all(&dir).unwrap();
        let p = dir.join("status.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert_eq!(
            fs::read_dir(&dir).unwrap().count(),
            1,
            "no temporary file left"
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}
