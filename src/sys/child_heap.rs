//! The heap of a vfork-like child ([`super::clone::clone3_vfork`]), which runs in its
//! parent's memory while the parent's thread waits. A container's set-up allocates (paths,
//! error lines, argv), and from glibc's heap those allocations would be the parent's: glibc
//! takes no lock in a single-threaded process, so a child killed inside malloc (a cgroup
//! kill, or the end of the pid namespace an exec joined) leaves the parent's arena
//! half-written, which it finds later as a corrupt chunk and aborts on; and whatever the
//! child still holds at exec is lost to the parent for good. posix_spawn's rule is that
//! such a child touches no allocator; podinit's set-up is too large for that, so while a
//! thread waits for such a child, the global allocator serves the child from an arena of
//! its own instead: a bump pointer over a private mapping, moved by one store per
//! allocation (a kill at any instruction leaves nothing half-done), and emptied when the
//! parent resumes. The parent's heap is then exactly as the parent left it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// Address space reserved for a child's allocations: the pages it touches are the only
/// ones that cost memory.
const SIZE: usize = 64 << 20;

/// The arena's first pages stay ours between children, as glibc keeps freed chunks: each
/// start would otherwise fault them in again (exec probes start every period). Above
/// this, what a child touched is given back when its parent resumes.
const KEEP: usize = 64 << 10;

/// The program's allocator: glibc's (`System`) but in a vfork-like child.
pub struct Allocator;

#[global_allocator]
static GLOBAL: Allocator = Allocator;

thread_local! {
    /// Set by a thread just before it clones a vfork-like child and cleared when it
    /// resumes: the child runs on this thread's TLS, so only it sees the flag set (the
    /// thread itself is stopped meanwhile, and other threads have their own).
    static IN_CHILD: Cell<bool> = const { Cell::new(false) };
}

/// The arena's mapping (0 until the first child), its bump pointer, and the highest the
/// pointer went since the last reset (what to give back).
static BASE: AtomicUsize = AtomicUsize::new(0);
static NEXT: AtomicUsize = AtomicUsize::new(0);
static HIGH: AtomicUsize = AtomicUsize::new(0);

fn in_child() -> bool {
    IN_CHILD.with(Cell::get)
}

fn in_arena(p: *mut u8) -> bool {
    let base = BASE.load(Relaxed);
    base != 0 && (base..base + SIZE).contains(&(p as usize))
}

/// A block of the arena, or null when it is full (Rust's allocation-failure path then ends
/// the child).
fn bump(l: Layout) -> *mut u8 {
    let base = BASE.load(Relaxed);
    let start = NEXT.load(Relaxed).next_multiple_of(l.align());
    let end = match start.checked_add(l.size()) {
        Some(end) if base != 0 && end <= base + SIZE => end,
        _ => return std::ptr::null_mut(),
    };
    if end > HIGH.load(Relaxed) {
        HIGH.store(end, Relaxed);
    }
    // The one store that hands the block out.
    NEXT.store(end, Relaxed);
    start as *mut u8
}

// SAFETY: `System` serves everything outside a vfork-like child; inside one, blocks are
// carved from the arena without overlap until the reset, which comes only when the child
// has exec'd or exited (the parent's thread resumes then and not before).
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if in_child() {
            return bump(l);
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(l) }
    }

    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        if in_child() {
            let p = bump(l);
            if !p.is_null() {
                // SAFETY: a fresh block of `l.size()` bytes (the arena's pages are reused:
                // not zero).
                unsafe { p.write_bytes(0, l.size()) };
            }
            return p;
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc_zeroed(l) }
    }

    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        if in_arena(p) {
            // The last block handed out is taken back (a String formatted and dropped);
            // the others wait for the reset. Outside the child (a fork-like copy of it, or a
            // parent handed a block by mistake) there is nothing to do.
            if in_child() && p as usize + l.size() == NEXT.load(Relaxed) {
                NEXT.store(p as usize, Relaxed);
            }
            return;
        }
        if in_child() {
            // The parent's memory: a child frees nothing of its parent's (the block stays
            // allocated, as the parent left it).
            return;
        }
        // SAFETY: the caller's contract: a block `System` gave.
        unsafe { System.dealloc(p, l) }
    }

    unsafe fn realloc(&self, p: *mut u8, l: Layout, new_size: usize) -> *mut u8 {
        let ours = in_arena(p);
        if !ours && !in_child() {
            // SAFETY: the caller's contract: a block `System` gave.
            return unsafe { System.realloc(p, l, new_size) };
        }
        if ours && in_child() && p as usize + l.size() == NEXT.load(Relaxed) {
            // The last block grows (or shrinks) where it is: a Vec or String being filled.
            let end = p as usize + new_size;
            if end <= BASE.load(Relaxed) + SIZE {
                if end > HIGH.load(Relaxed) {
                    HIGH.store(end, Relaxed);
                }
                NEXT.store(end, Relaxed);
                return p;
            }
            return std::ptr::null_mut();
        }
        // Moved: into the arena in the child, to `System` in a fork-like copy of it; the old
        // block is left where it is (see `dealloc`).
        // SAFETY: `realloc`'s contract makes this a valid layout.
        let nl = unsafe { Layout::from_size_align_unchecked(new_size, l.align()) };
        // SAFETY: a non-zero size, as `realloc`'s contract says.
        let q = unsafe { self.alloc(nl) };
        if !q.is_null() {
            // SAFETY: both blocks hold at least this many bytes and do not overlap.
            unsafe { std::ptr::copy_nonoverlapping(p, q, l.size().min(new_size)) };
        }
        q
    }
}

/// The calling thread waits for a vfork-like child until this is dropped: the child's
/// allocations come from the arena. Nested (a child that makes a vfork-like child of its
/// own) it changes nothing; the outermost's drop empties the arena.
pub(crate) struct Entered {
    was: bool,
}

/// Arm the arena for a vfork-like child of this thread, which must be made before the
/// returned guard is dropped; nothing may be allocated in between. Maps the arena on first
/// use.
pub(crate) fn enter() -> io::Result<Entered> {
    if BASE.load(Relaxed) == 0 {
        // SAFETY: a new private anonymous mapping, ours alone; reserved, not committed.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        BASE.store(p as usize, Relaxed);
        NEXT.store(p as usize, Relaxed);
        HIGH.store(p as usize, Relaxed);
    }
    Ok(Entered {
        was: IN_CHILD.replace(true),
    })
}

impl Drop for Entered {
    fn drop(&mut self) {
        IN_CHILD.set(self.was);
        if self.was {
            return;
        }
        // The child has exec'd or exited: nothing in the arena is anyone's any more. The
        // pages it touched beyond the first few are given back, so that a large set-up
        // costs no memory once done.
        let base = BASE.load(Relaxed);
        let high = HIGH.load(Relaxed);
        if high > base + KEEP {
            let len = (high - base - KEEP).next_multiple_of(4096);
            // SAFETY: our own arena's pages, which nothing uses.
            unsafe { libc::madvise((base + KEEP) as *mut libc::c_void, len, libc::MADV_DONTNEED) };
        }
        NEXT.store(base, Relaxed);
        HIGH.store(base, Relaxed);
    }
}

/// In the child of a fork-like clone: its memory is a copy of its own, where glibc's heap
/// is as consistent as the waiting parent left it, so it allocates from there again even
/// when it was forked by a vfork-like child (a hop).
pub(crate) fn forked() {
    IN_CHILD.set(false);
}

/// The bytes the arena holds now (0 outside a vfork-like child): for tests.
pub fn arena_in_use() -> usize {
    NEXT.load(Relaxed) - BASE.load(Relaxed)
}

/// Held by the tests that arm the arena or make vfork-like children (the harness runs
/// tests on parallel threads, and the arena and the vfork stack are one each).
#[cfg(test)]
pub(crate) static TEST_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[cfg(test)]
mod tests {
    use super::*;

    /// Armed on this thread as for a child: its blocks are the arena's, the last one grows
    /// in place and is taken back, and the disarm empties the arena.
    #[test]
    fn a_childs_blocks_come_from_the_arena_and_are_gone_after_it() {
        let _one = TEST_LOCK.lock();
        let before = String::from("the parent's");
        let mut parents = before.clone();
        parents.shrink_to_fit();
        let heap = enter().unwrap();
        let mut v: Vec<u8> = Vec::with_capacity(16);
        let p = v.as_ptr() as *mut u8;
        assert!(in_arena(p), "a child's block is the arena's");
        v.extend(std::iter::repeat_n(7u8, 4096));
        assert_eq!(v.as_ptr() as *mut u8, p, "the last block grew in place");
        assert!(v.iter().all(|&b| b == 7));
        let used = arena_in_use();
        assert!(used >= 4096, "{used}");
        let s = format!("{used}");
        drop(s);
        assert_eq!(arena_in_use(), used, "the last block was taken back");
        // A parent's block grown by the child is copied into the arena; the old one is
        // left to its owner, not freed.
        parents.push_str(" string, grown by the child");
        assert!(in_arena(parents.as_ptr() as *mut u8));
        assert!(parents.starts_with("the parent's"));
        drop(parents);
        drop(v);
        drop(heap);
        assert_eq!(arena_in_use(), 0);
        let after: Vec<u8> = std::iter::repeat_n(1u8, 64).collect();
        assert!(
            !in_arena(after.as_ptr() as *mut u8),
            "the parent's blocks are glibc's"
        );
        assert_eq!(before, "the parent's");
    }

    /// Nested (a hop's own vfork-like child), the inner disarm leaves the arena armed and
    /// whole; the outer one empties it.
    #[test]
    fn a_nested_child_keeps_the_outer_ones_blocks() {
        let _one = TEST_LOCK.lock();
        let outer = enter().unwrap();
        let kept = vec![3u8; 100];
        let inner = enter().unwrap();
        let more = vec![4u8; 100];
        drop(inner);
        assert!(in_child());
        assert!(arena_in_use() >= 200);
        assert!(kept.iter().all(|&b| b == 3) && more.iter().all(|&b| b == 4));
        drop((kept, more));
        drop(outer);
        assert!(!in_child());
        assert_eq!(arena_in_use(), 0);
    }

    /// A block that a fork-like copy of a child inherited from the arena moves to glibc's
    /// heap when it grows, and is never handed to glibc's free.
    #[test]
    fn a_forked_copy_allocates_from_glibc_again() {
        let _one = TEST_LOCK.lock();
        let heap = enter().unwrap();
        let mut inherited = vec![5u8; 32];
        // What `clone3`'s child does first.
        forked();
        let own = vec![6u8; 32];
        assert!(!in_arena(own.as_ptr() as *mut u8));
        inherited.extend([5u8; 4096]);
        assert!(!in_arena(inherited.as_ptr() as *mut u8));
        assert!(inherited.iter().all(|&b| b == 5));
        drop((own, inherited));
        IN_CHILD.set(true);
        drop(heap);
        assert_eq!(arena_in_use(), 0);
    }

    /// What a child touched beyond the kept pages is given back when it ends; the kept
    /// ones stay for the next child.
    #[test]
    fn a_large_childs_pages_are_given_back() {
        let _one = TEST_LOCK.lock();
        let heap = enter().unwrap();
        let big = vec![9u8; 1 << 20];
        assert!(in_arena(big.as_ptr() as *mut u8));
        drop(big);
        drop(heap);
        let base = BASE.load(Relaxed);
        let pages = SIZE.min(2 << 20) / 4096;
        let mut resident = vec![0u8; pages];
        // SAFETY: mincore over the start of our own mapping, into a vector of one byte a
        // page.
        let rc = unsafe {
            libc::mincore(
                base as *mut libc::c_void,
                pages * 4096,
                resident.as_mut_ptr(),
            )
        };
        assert_eq!(rc, 0, "{}", io::Error::last_os_error());
        let kept = KEEP / 4096;
        assert!(
            resident[kept..].iter().all(|&r| r & 1 == 0),
            "pages above the kept ones stayed"
        );
        assert!(
            resident[..kept].iter().any(|&r| r & 1 == 1),
            "the kept pages were dropped"
        );
    }
}
