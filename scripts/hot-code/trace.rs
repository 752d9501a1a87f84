//! Finds the functions a running process executes: a one-shot breakpoint (int3) on the
//! entry of every function, each removed at its first hit, so the process runs at full
//! speed once its working set is known. Memory shared with the process (its vfork-like
//! children, which run in it until they exec) counts; forked children (a container's
//! init, a copy of the memory) are followed only to keep them from tripping over the
//! copied breakpoints. Every thread of the process is traced (the containerd shim has
//! many). At the end every breakpoint left is removed.
//! Used by scripts/hot-code; built with plain rustc, no crates.
//!
//! usage: trace PID SECONDS < entry-addresses > hit-addresses   (hex, one a line, in the
//! order of their first run)
use std::collections::{HashMap, HashSet};
use std::io::{BufRead, Write};
use std::time::Duration;

const PTRACE_PEEKTEXT: i64 = 1;
const PTRACE_PEEKUSER: i64 = 3;
const PTRACE_POKETEXT: i64 = 4;
const PTRACE_POKEUSER: i64 = 6;
const PTRACE_CONT: i64 = 7;
const PTRACE_SYSCALL: i64 = 24;
const PTRACE_DETACH: i64 = 17;
const PTRACE_SEIZE: i64 = 0x4206;
const PTRACE_INTERRUPT: i64 = 0x4207;
const O_TRACESYSGOOD: usize = 0x1;
const O_TRACEFORK: usize = 0x2;
const O_TRACEVFORK: usize = 0x4;
const O_TRACECLONE: usize = 0x8;
const O_TRACEEXEC: usize = 0x10;
const EVENT_FORK: i32 = 1;
const EVENT_VFORK: i32 = 2;
const EVENT_CLONE: i32 = 3;
const EVENT_EXEC: i32 = 4;
const PTRACE_GETEVENTMSG: i64 = 0x4201;
const RIP: usize = 16 * 8; // offsets in struct user_regs_struct
const RAX: usize = 10 * 8;
const ORIG_RAX: usize = 15 * 8;
const SYS_MADVISE: usize = 28;
const ENOSYS: usize = 38;
const SIGTRAP: i32 = 5;
const SIGSTOP: i32 = 19;
const SIGURG: i32 = 23;
const WALL: i32 = 0x4000_0000;

extern "C" {
    fn ptrace(req: i64, pid: i32, addr: usize, data: usize) -> i64;
    fn waitpid(pid: i32, status: *mut i32, options: i32) -> i32;
    fn kill(pid: i32, sig: i32) -> i32;
}

fn peek(pid: i32, addr: usize) -> u64 {
    // SAFETY: reads a stopped tracee's memory.
    unsafe { ptrace(PTRACE_PEEKTEXT, pid, addr, 0) as u64 }
}

fn poke_byte(pid: i32, addr: usize, byte: u8) {
    let word = (peek(pid, addr) & !0xff) | byte as u64;
    // SAFETY: writes a stopped tracee's memory.
    unsafe { ptrace(PTRACE_POKETEXT, pid, addr, word as usize) };
}

/// The process a thread belongs to.
fn tgid(tid: i32) -> Option<i32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))?
        .trim()
        .parse()
        .ok()
}

/// The functions containing the stopped process's instruction pointer and every word of
/// its stack that points into one of them (return addresses, and a few stale values that
/// merely look like them: harmless here).
fn on_stack(pid: i32, sorted: &[usize]) -> Vec<usize> {
    const RSP: usize = 19 * 8;
    // SAFETY: reading registers of a stopped tracee.
    let (rip, rsp) = unsafe {
        (
            ptrace(PTRACE_PEEKUSER, pid, RIP, 0) as usize,
            ptrace(PTRACE_PEEKUSER, pid, RSP, 0) as usize,
        )
    };
    let mut words = vec![rip];
    if let Ok(mut mem) = std::fs::File::open(format!("/proc/{pid}/mem")) {
        use std::io::{Read, Seek, SeekFrom};
        let mut buf = Vec::new();
        let mut at = rsp;
        // Up to the stack's end: the first read that fails.
        loop {
            buf.resize(4096 - (at & 4095), 0);
            if mem.seek(SeekFrom::Start(at as u64)).is_err() || mem.read_exact(&mut buf).is_err() {
                break;
            }
            words.extend(
                buf.chunks_exact(8)
                    .map(|w| usize::from_le_bytes(w.try_into().unwrap())),
            );
            at += buf.len();
        }
    }
    let (lo, hi) = (sorted[0], sorted[sorted.len() - 1] + (1 << 16));
    let mut found = Vec::new();
    for w in words.into_iter().filter(|w| (lo..hi).contains(w)) {
        let f = sorted[sorted.partition_point(|&e| e <= w) - 1];
        if !found.contains(&f) {
            found.push(f);
        }
    }
    found
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let pid: i32 = args[1].parse().expect("PID");
    let secs: u64 = args[2].parse().expect("SECONDS");
    // Sorted, without duplicates: `on_stack` looks functions up by address.
    let mut entries: Vec<usize> = std::io::stdin()
        .lock()
        .lines()
        .map(|l| usize::from_str_radix(l.unwrap().trim(), 16).expect("hex address"))
        .collect();
    entries.sort_unstable();
    entries.dedup();
    let opts = O_TRACESYSGOOD | O_TRACEFORK | O_TRACEVFORK | O_TRACECLONE | O_TRACEEXEC;
    let mut status = 0;
    // Every thread of the process (a breakpoint hit by an untraced one would kill it).
    let threads: Vec<i32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("the process's threads")
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    for &t in &threads {
        // SAFETY: attaching to a thread of the pid we were given and waiting for it to stop.
        unsafe {
            assert_eq!(ptrace(PTRACE_SEIZE, t, 0, opts), 0, "PTRACE_SEIZE {t}");
            ptrace(PTRACE_INTERRUPT, t, 0, 0);
            waitpid(t, &mut status, WALL);
        }
    }
    // The functions under way when we attach (the event loop, its callers) are entered
    // before the trace and never again: take them from the stacks' return addresses.
    let mut hits: Vec<usize> = Vec::new(); // in the order of their first run
    for &t in &threads {
        for f in on_stack(t, &entries) {
            if !hits.contains(&f) {
                hits.push(f);
            }
        }
    }
    let mut hit: HashSet<usize> = hits.iter().copied().collect();
    let mut orig: HashMap<usize, u8> = HashMap::new();
    for &a in &entries {
        orig.insert(a, peek(pid, a) as u8);
        poke_byte(pid, a, 0xcc);
    }
    // The process's own memory is followed syscall by syscall: its page release (madvise
    // MADV_DONTNEED of the binary) drops the private pages that hold our breakpoints, so
    // they are set again after each.
    for &t in &threads {
        // SAFETY: the tracee is stopped.
        unsafe { ptrace(PTRACE_SYSCALL, t, 0, 0) };
    }
    // The deadline arrives as a signal the tracer intercepts (and the tracee never sees).
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(secs));
        // SAFETY: plain kill.
        unsafe { kill(pid, SIGURG) };
    });
    // Tracees and whether they share the process's memory.
    let mut shared: HashMap<i32, bool> = threads.iter().map(|&t| (t, true)).collect();
    let mut ending = false;
    while !shared.is_empty() {
        // SAFETY: waiting for our tracees.
        let p = unsafe { waitpid(-1, &mut status, WALL) };
        if p < 0 {
            break;
        }
        if status & 0x7f != 0x7f {
            shared.remove(&p);
            continue;
        }
        let sig = (status >> 8) & 0xff;
        let event = status >> 16;
        // A new thread may stop before its creator reports it.
        let mine = *shared.entry(p).or_insert_with(|| tgid(p) == Some(pid));
        let mut deliver = 0;
        // SAFETY: `p` is a stopped tracee throughout.
        unsafe {
            match event {
                EVENT_FORK | EVENT_VFORK | EVENT_CLONE => {
                    let mut child = 0usize;
                    ptrace(PTRACE_GETEVENTMSG, p, 0, &mut child as *mut usize as usize);
                    // A vfork-like child runs in our memory until it execs; a new
                    // thread of the process for good.
                    let same = event == EVENT_VFORK || tgid(child as i32) == Some(pid);
                    shared.insert(child as i32, mine && same);
                }
                EVENT_EXEC if p != pid => {
                    ptrace(PTRACE_DETACH, p, 0, 0);
                    shared.remove(&p);
                    continue;
                }
                0 if sig == SIGTRAP | 0x80 => {
                    let nr = ptrace(PTRACE_PEEKUSER, p, ORIG_RAX, 0) as usize;
                    let ret = ptrace(PTRACE_PEEKUSER, p, RAX, 0) as usize;
                    if mine && nr == SYS_MADVISE && ret != ENOSYS.wrapping_neg() {
                        for (&a, &b) in &orig {
                            if !hit.contains(&a) && peek(p, a) as u8 == b {
                                poke_byte(p, a, 0xcc);
                            }
                        }
                    }
                }
                0 if sig == SIGTRAP => {
                    let at = ptrace(PTRACE_PEEKUSER, p, RIP, 0) as usize - 1;
                    if let Some(&b) = orig.get(&at) {
                        // Another thread may have hit the same breakpoint at the same
                        // time and put the byte back already: this one ran the int3 all
                        // the same, and resumes at the instruction's start either way.
                        if peek(p, at) as u8 == 0xcc {
                            poke_byte(p, at, b);
                        }
                        ptrace(PTRACE_POKEUSER, p, RIP, at);
                        if mine && hit.insert(at) {
                            hits.push(at);
                        }
                    } else {
                        deliver = sig;
                    }
                }
                // The deadline, sent to the process: any of its threads may take it.
                0 if mine && sig == SIGURG => ending = true,
                0 if sig != SIGSTOP => deliver = sig,
                _ => {}
            }
            if ending {
                // Remove what is left, in the process's memory and in any copy of it.
                for (&a, &b) in &orig {
                    if peek(p, a) as u8 == 0xcc && b != 0xcc {
                        poke_byte(p, a, b);
                    }
                }
                ptrace(PTRACE_DETACH, p, 0, deliver as usize);
                shared.remove(&p);
                for &q in shared.keys() {
                    ptrace(PTRACE_INTERRUPT, q, 0, 0);
                }
                continue;
            }
            let how = if mine { PTRACE_SYSCALL } else { PTRACE_CONT };
            ptrace(how, p, 0, deliver as usize);
        }
    }
    eprintln!("trace: {} of {} functions run", hits.len(), entries.len());
    let mut out = std::io::stdout().lock();
    for a in hits {
        writeln!(out, "{a:x}").unwrap();
    }
}
