//! Giving start-up memory back to the kernel.

/// Give back the memory of start-up work: drop this process's mappings of the executable's
/// read-only segments (code and constants) and return free heap to the kernel. Like the
/// kernel freeing its init sections once booted: the manifest loader, validation and the
/// container set-up code ran once; their pages stay in the page cache, shared with every
/// podinit, and whatever runs again is mapped back from there by a minor fault. Writable
/// and RELRO segments (relocated at start, so private copies) are not touched; the dead
/// part of the stack is dropped too.
pub fn release_startup_pages() {
    /// The read-only segments of the executable (a handful), in a fixed array: freeing a
    /// Vec after the release would map malloc's code back.
    struct Ranges {
        r: [(usize, usize); 8],
        n: usize,
    }
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
    // The code last, and through libc's `syscall` alone: what runs after the drop is mapped
    // back with its neighbours (the kernel's fault-around, 64 KiB a fault), so the fewer
    // places it runs in on the way back to the caller, the better.
    for &(addr, len) in &ranges.r[..ranges.n] {
        // SAFETY: read-only, file-backed mappings of our own executable: dropping them
        // loses nothing, the next access maps the same page again.
        unsafe { libc::syscall(libc::SYS_madvise, addr, len, libc::MADV_DONTNEED) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The code, constants and relocated data stay usable after the release.
    #[test]
    fn code_runs_on_after_its_pages_are_given_back() {
        let before: Vec<String> = (0..100).map(|i| format!("{i:x}")).collect();
        release_startup_pages();
        let shown: Box<dyn std::fmt::Debug> = Box::new(before.clone());
        assert_eq!(format!("{shown:?}").len(), format!("{before:?}").len());
    }
}
