//! Giving start-up memory back to the kernel.

/// Give back the memory of start-up work: drop this process's mappings of the executable's
/// read-only segments (code and constants) and return free heap to the kernel. Like the
/// kernel freeing its init sections once booted: the manifest loader, validation and the
/// container set-up code ran once; their pages stay in the page cache, shared with every
/// podinit, and whatever runs again is mapped back from there by a minor fault. Writable
/// and RELRO segments (relocated at start, so private copies) are not touched; the dead
/// part of the stack is dropped too.
pub fn release_startup_pages() {
    let (ranges, floor) = give_back_heap();
    if let Some(floor) = floor {
        // SAFETY: the main thread's stack below this frame is dead.
        unsafe { drop_dead_stack(floor) };
    }
    // The code last, and through libc's `syscall` alone: what runs after the drop is mapped
    // back with its neighbours (the kernel's fault-around, 64 KiB a fault), so the fewer
    // places it runs in on the way back to the caller, the better.
    for &(addr, len) in &ranges.r[..ranges.n] {
        // SAFETY: read-only, file-backed mappings of our own executable: dropping them
        // loses nothing, the next access maps the same page again.
        unsafe { libc::syscall(libc::SYS_madvise, addr, len, libc::MADV_DONTNEED) };
    }
}

/// [`release_startup_pages`], then `poll(2)` on `fds` for `timeout`, as `nix::poll::poll`.
/// For a loop that is about to wait: the drop and the wait are one function that calls
/// nothing (raw system calls), so a process that then waits at rest has only this
/// function's code mapped back, wherever its callers and libc's `poll` lie in the binary.
pub fn release_startup_pages_and_poll(
    fds: &mut [nix::poll::PollFd],
    timeout: nix::poll::PollTimeout,
) -> nix::Result<libc::c_int> {
    let (ranges, floor) = give_back_heap();
    // SAFETY: `PollFd` is a transparent `pollfd`; the ranges are the executable's
    // read-only segments (see `release_startup_pages`); the stack below drop_then_poll is
    // dead on the main thread.
    let res = unsafe {
        drop_then_poll(
            &ranges,
            floor,
            fds.as_mut_ptr().cast(),
            fds.len(),
            i32::from(timeout),
        )
    };
    nix::errno::Errno::result(res as libc::c_int)
}

/// The read-only segments of the executable (a handful), in a fixed array: freeing a
/// Vec after the release would map malloc's code back.
struct Ranges {
    r: [(usize, usize); 8],
    n: usize,
}

/// Drop the dead stack (with `stack`) and the code ranges, then poll: every system call
/// made inline, no function called between the drop and the wait. Returns poll's raw
/// result (`-errno` on failure).
///
/// # Safety
/// `fds` points at `nfds` pollfds; `ranges` holds read-only file mappings of our own;
/// `stack` is the main stack's floor, and only when the caller runs on it.
#[inline(never)]
unsafe fn drop_then_poll(
    ranges: &Ranges,
    stack: Option<usize>,
    fds: *mut libc::pollfd,
    nfds: usize,
    timeout: i32,
) -> isize {
    if let Some(floor) = stack {
        // SAFETY: the caller's.
        unsafe { drop_dead_stack(floor) };
    }
    let mut i = 0;
    while i < ranges.n && i < ranges.r.len() {
        let (addr, len) = ranges.r[i];
        // SAFETY: the caller's: a read-only mapping of the executable.
        unsafe { raw_syscall3(libc::SYS_madvise, addr, len, libc::MADV_DONTNEED as usize) };
        i += 1;
    }
    // SAFETY: the caller's: `nfds` pollfds at `fds`.
    let res = unsafe { raw_syscall3(libc::SYS_poll, fds as usize, nfds, timeout as usize) };
    if res < 0 {
        // A wait that failed (EINTR): errno as libc's poll would leave it.
        set_errno(-res);
        return -1;
    }
    res
}

/// Set `errno`, for `Errno::result` on the -1 that follows.
#[cold]
fn set_errno(e: isize) {
    nix::errno::Errno::set_raw(e as i32);
}

/// A system call with up to three arguments, inline (no libc function called).
///
/// # Safety
/// As the system call `n` with those arguments.
#[inline(always)]
unsafe fn raw_syscall3(n: libc::c_long, a: usize, b: usize, c: usize) -> isize {
    #[cfg(target_arch = "x86_64")]
    {
        let ret: isize;
        // SAFETY: the caller's; `syscall` clobbers rcx and r11 only.
        unsafe {
            std::arch::asm!(
                "syscall",
                inlateout("rax") n as isize => ret,
                in("rdi") a,
                in("rsi") b,
                in("rdx") c,
                lateout("rcx") _,
                lateout("r11") _,
                options(nostack),
            );
        }
        ret
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        // SAFETY: the caller's.
        let r = unsafe { libc::syscall(n, a, b, c) } as isize;
        if r < 0 {
            -(nix::errno::Errno::last_raw() as isize)
        } else {
            r
        }
    }
}

/// The start-up heap given back; returns the code ranges to drop last, and the lowest
/// address of the main stack when the caller runs on it (its dead part is dropped last
/// but one, down to there).
fn give_back_heap() -> (Ranges, Option<usize>) {
    let mut ranges = Ranges {
        r: [(0, 0); 8],
        n: 0,
    };
    unsafe extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: dl_iterate_phdr hands a valid info; `data` is the Ranges below.
        let (info, ranges) = unsafe { (&*info, &mut *(data as *mut Ranges)) };
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
            if start < end && !overlaps_relro && ranges.n < ranges.r.len() {
                ranges.r[ranges.n] = (info.dlpi_addr as usize + start, end - start);
                ranges.n += 1;
            }
        }
        1 // the executable comes first; what follows (the vDSO) is not ours
    }
    // SAFETY: the callback only reads the headers it is given.
    unsafe { libc::dl_iterate_phdr(Some(each), &mut ranges as *mut _ as *mut libc::c_void) };
    // The dead stack is dropped last, below the frame that waits, and only on the main
    // thread's own stack (the supervisor's and the outer process's). A process running on
    // a copy of a mapped stack (the pod's pause, a fork-like copy of a vfork-like hop) has
    // neighbours there that are not stack: its floor is None and nothing is dropped.
    let marker = 0u8;
    let here = std::hint::black_box(&marker) as *const u8 as usize;
    // SAFETY: plain calls without pointers, and getrlimit into a local struct.
    let (main_thread, stack_top, limit) = unsafe {
        let mut lim: libc::rlimit = std::mem::zeroed();
        libc::getrlimit(libc::RLIMIT_STACK, &mut lim);
        (
            libc::gettid() == libc::getpid(),
            libc::getauxval(libc::AT_RANDOM) as usize,
            lim.rlim_cur,
        )
    };
    let floor = main_thread
        .then(|| main_stack_floor(here, stack_top, limit))
        .flatten();
    if main_thread {
        flush_thread_cache();
    }
    // SAFETY: no other thread allocates during the call (glibc locks anyway).
    unsafe { libc::malloc_trim(0) };
    (ranges, floor)
}

/// The bytes glibc's heap holds in use, over every arena (`mallinfo2`'s `uordblks`): for
/// tests that hold what a step leaves on the heap.
pub fn heap_in_use() -> usize {
    // SAFETY: mallinfo2 only reads malloc's counters.
    unsafe { libc::mallinfo2() }.uordblks
}

/// Run this thread's allocations without glibc's per-thread cache from now on, as
/// `GLIBC_TUNABLES=glibc.malloc.tcache_count=0` would: for a process that lives long
/// and waits at rest (`podinit run`), called before its start-up. The cache hands back
/// the chunk freed last wherever it lies, so that what start-up keeps ends up spread
/// over the heap, a few bytes pinning each page; without it malloc takes the best fit
/// and merges what is freed at once, and the release finds whole free pages to give back.
pub fn without_thread_cache() {
    flush_thread_cache();
}

/// Hand the chunks glibc's per-thread cache (tcache) holds back to the heap, and keep no
/// such cache from now on. Each size keeps up to seven freed chunks there, which count as
/// in use: `malloc_trim` can neither merge them with their free neighbours nor give their
/// pages back, and scattered over the heap they pin most of what start-up left. glibc
/// has no public call for it; this is the one it makes when a thread exits (it frees the
/// cache's chunks and detaches the thread from its arena, which the next allocation
/// takes again), a global symbol of static glibc's malloc (a glibc without it fails to
/// link, never silently). Only a process that stays with one thread while it waits calls
/// it (the supervisor, the outer process, pause).
fn flush_thread_cache() {
    #[cfg(all(target_env = "gnu", target_feature = "crt-static"))]
    {
        extern "C" {
            fn __malloc_arena_thread_freeres();
        }
        // SAFETY: glibc's thread shutdown of malloc; the thread allocates on afterwards
        // from its arena without a cache, as a thread made after `tcache_count=0` would.
        unsafe { __malloc_arena_thread_freeres() };
    }
}

/// Drop the main stack below the caller's frame ([`dead_below`]), no deeper than `floor`:
/// start-up went deeper (parsing, validation) than the wait does. Inline, through a raw
/// system call, so that the pages malloc_trim and the rest of the release touched below
/// the caller go too.
///
/// # Safety
/// On the main thread's own stack only (`floor` from [`main_stack_floor`]); nothing below
/// the caller's frame is used afterwards but what a new call writes first.
#[inline(always)]
unsafe fn drop_dead_stack(floor: usize) {
    let marker = 0u8;
    let here = std::hint::black_box(&marker) as *const u8 as usize;
    if let Some((start, len)) = dead_below(here, floor) {
        // SAFETY: dead stack pages, refilled with zeros if ever used again.
        unsafe { raw_syscall3(libc::SYS_madvise, start, len, libc::MADV_DONTNEED as usize) };
    }
}

/// The lowest address the main stack can reach, when `here` lies on it (with room for
/// the release's own frames below), else None. `stack_top` is where the kernel put
/// `AT_RANDOM`'s bytes at exec, near the top of the main stack; the stack cannot reach more
/// than its `limit` (`RLIMIT_STACK`, at most 8 MiB counted) below it, and the kernel maps
/// nothing else there (mmap's base is kept at least that far below).
fn main_stack_floor(here: usize, stack_top: usize, limit: u64) -> Option<usize> {
    let span = usize::try_from(limit).unwrap_or(usize::MAX).min(8 << 20);
    let floor = stack_top.checked_sub(span)?.next_multiple_of(4096);
    (here < stack_top && here > floor + (16 << 10)).then_some(floor)
}

/// The dead stack below the frame at `here`, as (start, len): at most 1 MiB, a page kept
/// under the frame for itself, its red zone and a signal handler, never below `floor`.
#[inline(always)]
fn dead_below(here: usize, floor: usize) -> Option<(usize, usize)> {
    let end = (here - 4096) & !4095;
    let start = end.saturating_sub(1 << 20).max(floor);
    (start < end).then_some((start, end - start))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wait after the release is poll's: a ready fd is reported, a timeout is 0.
    #[test]
    fn the_wait_after_the_release_is_polls() {
        use nix::poll::{PollFd, PollFlags, PollTimeout};
        use std::os::fd::AsFd;
        let (r, w) = nix::unistd::pipe().unwrap();
        let mut fds = [PollFd::new(r.as_fd(), PollFlags::POLLIN)];
        assert_eq!(
            release_startup_pages_and_poll(&mut fds, PollTimeout::ZERO),
            Ok(0)
        );
        nix::unistd::write(&w, b"x").unwrap();
        let mut fds = [PollFd::new(r.as_fd(), PollFlags::POLLIN)];
        assert_eq!(
            release_startup_pages_and_poll(&mut fds, PollTimeout::from(1000u16)),
            Ok(1)
        );
        assert!(fds[0].revents().unwrap().contains(PollFlags::POLLIN));
        // A bad fd count is poll's error, as errno.
        assert_eq!(
            // SAFETY: no fds at a null pointer, more than RLIMIT_NOFILE of them: EINVAL.
            nix::errno::Errno::result(unsafe {
                drop_then_poll(
                    &Ranges {
                        r: [(0, 0); 8],
                        n: 0,
                    },
                    None,
                    std::ptr::null_mut(),
                    usize::MAX,
                    0,
                )
            } as libc::c_int),
            Err(nix::errno::Errno::EINVAL)
        );
    }

    /// After the thread's cache is handed back, the thread allocates on: what it frees is
    /// found again by the next allocations, and what was live keeps its contents.
    #[test]
    fn allocation_goes_on_without_the_thread_cache() {
        let kept: Vec<Box<[u8; 48]>> = (0..64u8).map(|i| Box::new([i; 48])).collect();
        let freed: Vec<Vec<u8>> = (0..64).map(|i| vec![i as u8; 16 + i * 8]).collect();
        drop(freed);
        flush_thread_cache();
        let again: Vec<Vec<u8>> = (0..64).map(|i| vec![i as u8; 16 + i * 8]).collect();
        assert!(again
            .iter()
            .enumerate()
            .all(|(i, v)| v.len() == 16 + i * 8 && v.iter().all(|&b| b == i as u8)));
        assert!(kept
            .iter()
            .enumerate()
            .all(|(i, b)| b.iter().all(|&x| x == i as u8)));
        // A second flush finds no cache: nothing to do.
        flush_thread_cache();
        drop((kept, again));
    }

    /// The code, constants and relocated data stay usable after the release.
    #[test]
    fn code_runs_on_after_its_pages_are_given_back() {
        let before: Vec<String> = (0..100).map(|i| format!("{i:x}")).collect();
        release_startup_pages();
        let shown: Box<dyn std::fmt::Debug> = Box::new(before.clone());
        assert_eq!(format!("{shown:?}").len(), format!("{before:?}").len());
    }

    /// The dead stack dropped is the main stack's below us, no deeper than its limit allows;
    /// a frame that is not on the main stack (a copy of a vfork-like child's mapped stack,
    /// as the pod's pause runs on) drops nothing.
    #[test]
    fn only_the_main_stacks_dead_part_is_dropped() {
        let top = 0x7ffd_0000_0000usize;
        let here = top - (40 << 10);
        let floor = main_stack_floor(here, top, 8 << 20).unwrap();
        assert_eq!(floor, top - (8 << 20));
        let (start, len) = dead_below(here, floor).unwrap();
        assert_eq!(start + len, (here - 4096) & !4095);
        assert_eq!(len, 1 << 20);
        // A small limit: nothing below it.
        let floor = main_stack_floor(here, top, 256 << 10).unwrap();
        assert_eq!(dead_below(here, floor).unwrap().0, top - (256 << 10));
        // Unlimited counts as 8 MiB.
        assert_eq!(
            main_stack_floor(here, top, libc::RLIM_INFINITY),
            Some(top - (8 << 20))
        );
        // Not on the main stack: far below it (the mmap area) or above it.
        assert_eq!(main_stack_floor(top - (200 << 20), top, 8 << 20), None);
        assert_eq!(
            main_stack_floor(top - (200 << 20), top, libc::RLIM_INFINITY),
            None
        );
        assert_eq!(main_stack_floor(top + 4096, top, 8 << 20), None);
        // Too close to the floor to leave room for the release's frames.
        assert_eq!(main_stack_floor(top - (250 << 10), top, 256 << 10), None);
    }
}
