//! An OCI `linux.seccomp` profile as a classic BPF program: compiled in the supervisor
//! ([`compile`]), installed by the container's init right before execve ([`install`]).
//!
//! A small generator of our own rather than the `seccompiler` crate: a seccompiler filter
//! has one match action for all its rules and one target architecture, and it has no
//! public syscall-name table, while an OCI profile gives each rule its own action and
//! errno and covers x86_64, i386 and x32 at once. The semantics are libseccomp's as runc
//! drives it:
//! - the native architecture is always filtered; `architectures` adds i386 and x32 (the
//!   others cannot run on this kernel). Any other audit architecture, and on x86_64 an x32
//!   syscall number when x32 is not listed, get `SECCOMP_RET_KILL_THREAD` (libseccomp's
//!   bad-architecture action).
//! - a name known on no architecture is skipped (runc skips names libseccomp does not
//!   know); so is a rule whose action is the default action.
//! - per syscall, an unconditional rule wins; otherwise rules are tried in profile order
//!   and the first whose conditions all hold decides; none → the default action.
//! - conditions on distinct arguments are ANDed; a rule with several conditions on the same
//!   argument becomes one rule per condition (ORed), as runc splits them for libseccomp.
//! - comparisons are unsigned 64-bit on x86_64 and x32, 32-bit on i386.
//! - runc's -ENOSYS stub: unless the default action lets the call through, a syscall
//!   number above the largest one the profile names on its architecture fails with ENOSYS,
//!   so that a libc falls back from syscalls newer than the profile.
//!
//! i386 `socketcall(2)`-multiplexed calls are filtered as `socketcall` only.

use oci_spec::runtime::LinuxSeccompOperator as CmpOp;
use oci_spec::runtime::{Arch, LinuxSeccomp, LinuxSeccompAction, LinuxSeccompFilterFlag};
use std::collections::BTreeMap;

use super::syscall_table;

/// A compiled filter and its `seccomp(2)` flags.
#[derive(Clone, Debug)]
pub struct Filter {
    pub program: Vec<libc::sock_filter>,
    pub flags: libc::c_ulong,
}

const RET_KILL_PROCESS: u32 = 0x8000_0000;
const RET_KILL_THREAD: u32 = 0;
const RET_TRAP: u32 = 0x0003_0000;
const RET_ERRNO: u32 = 0x0005_0000;
const RET_TRACE: u32 = 0x7ff0_0000;
const RET_LOG: u32 = 0x7ffc_0000;
const RET_ALLOW: u32 = 0x7fff_0000;

const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
const AUDIT_ARCH_I386: u32 = 0x4000_0003;
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

const FLAG_LOG: libc::c_ulong = 1 << 1;
const FLAG_SPEC_ALLOW: libc::c_ulong = 1 << 2;
/// The kernel's BPF_MAXINSNS.
const MAX_INSNS: usize = 4096;

// cBPF opcodes.
const LD_W_ABS: u16 = 0x20;
const ALU_AND_K: u16 = 0x54;
const JA: u16 = 0x05;
const JEQ_K: u16 = 0x15;
const JGT_K: u16 = 0x25;
const JGE_K: u16 = 0x35;
const RET_K: u16 = 0x06;

// struct seccomp_data: nr, arch, instruction_pointer, args[6] (little-endian words).
const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
fn off_arg(index: u8, high: bool) -> u32 {
    16 + 8 * index as u32 + if high { 4 } else { 0 }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ArchKind {
    X86_64,
    I386,
    X32,
}

#[derive(Clone, Copy, Debug)]
struct Cond {
    index: u8,
    op: CmpOp,
    value: u64,
    value_two: u64,
}

#[derive(Clone, Debug)]
struct Rule {
    conds: Vec<Cond>,
    ret: u32,
}

/// The return value of an action (runc's `getAction`): ERRNO and TRACE carry `errnoRet`,
/// EPERM when unset; SCMP_ACT_KILL kills the thread.
fn action(a: LinuxSeccompAction, errno_ret: Option<u32>, field: &str) -> Result<u32, String> {
    use LinuxSeccompAction::*;
    let data = |base: u32| match errno_ret {
        None => Ok(base | libc::EPERM as u32),
        Some(e) if e <= 0xffff => Ok(base | e),
        Some(e) => Err(format!("{field}: errnoRet {e} is out of range (0-65535)")),
    };
    match a {
        ScmpActKill | ScmpActKillThread => Ok(RET_KILL_THREAD),
        ScmpActKillProcess => Ok(RET_KILL_PROCESS),
        ScmpActTrap => Ok(RET_TRAP),
        ScmpActErrno => data(RET_ERRNO),
        ScmpActTrace => data(RET_TRACE),
        ScmpActLog => Ok(RET_LOG),
        ScmpActAllow => Ok(RET_ALLOW),
        ScmpActNotify => Err(format!("{field}: SCMP_ACT_NOTIFY is not supported")),
    }
}

/// Translate a profile. Errors name the profile field (`linux.seccomp.syscalls[3].action`).
pub fn compile(s: &LinuxSeccomp) -> Result<Filter, String> {
    let default = action(
        s.default_action(),
        s.default_errno_ret(),
        "linux.seccomp.defaultAction",
    )?;
    let mut arches = vec![ArchKind::X86_64];
    for a in s.architectures().iter().flatten() {
        let k = match a {
            Arch::ScmpArchX86 => ArchKind::I386,
            Arch::ScmpArchX32 => ArchKind::X32,
            _ => continue,
        };
        if !arches.contains(&k) {
            arches.push(k);
        }
    }
    let mut flags = 0;
    for f in s.flags().iter().flatten() {
        match f {
            // The container's init is single-threaded: nothing to synchronise.
            LinuxSeccompFilterFlag::SeccompFilterFlagTsync => {}
            LinuxSeccompFilterFlag::SeccompFilterFlagLog => flags |= FLAG_LOG,
            LinuxSeccompFilterFlag::SeccompFilterFlagSpecAllow => flags |= FLAG_SPEC_ALLOW,
            LinuxSeccompFilterFlag::SeccompFilterFlagWaitKillableRecv => {
                return Err("linux.seccomp.flags: SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV needs SCMP_ACT_NOTIFY, which is not supported".into())
            }
        }
    }

    // Per audit architecture (x86_64 and x32 share one, their numbers apart by the x32
    // bit): syscall number → rules in profile order. Per architecture: the largest number
    // the profile names (for the -ENOSYS stub).
    let (mut rules64, mut rules32) = (BTreeMap::new(), BTreeMap::new());
    let mut last: [Option<u32>; 3] = [None; 3];
    for (i, sc) in s.syscalls().iter().flatten().enumerate() {
        let field = format!("linux.seccomp.syscalls[{i}]");
        let ret = action(sc.action(), sc.errno_ret(), &format!("{field}.action"))?;
        let mut conds = Vec::new();
        for (j, a) in sc.args().iter().flatten().enumerate() {
            if a.index() > 5 {
                return Err(format!(
                    "{field}.args[{j}].index: {} is out of range (0-5)",
                    a.index()
                ));
            }
            conds.push(Cond {
                index: a.index() as u8,
                op: a.op(),
                value: a.value(),
                value_two: a.value_two().unwrap_or(0),
            });
        }
        let repeated = (0..6).any(|x| conds.iter().filter(|c| c.index == x).count() > 1);
        let alternatives: Vec<Vec<Cond>> = if repeated {
            conds.iter().map(|c| vec![*c]).collect()
        } else {
            vec![conds]
        };
        for name in sc.names() {
            let Some(n) = syscall_table::lookup(name) else {
                continue;
            };
            for &arch in &arches {
                let nr = match arch {
                    ArchKind::X86_64 => n.x86_64,
                    ArchKind::I386 => n.i386,
                    ArchKind::X32 => n.x32.map(|x| x | X32_SYSCALL_BIT),
                };
                let Some(nr) = nr else { continue };
                let a = arch as usize;
                last[a] = last[a].max(Some(nr));
                if ret == default {
                    continue;
                }
                let map = if arch == ArchKind::I386 {
                    &mut rules32
                } else {
                    &mut rules64
                };
                let list: &mut Vec<Rule> = map.entry(nr).or_default();
                for conds in &alternatives {
                    list.push(Rule {
                        conds: conds.clone(),
                        ret,
                    });
                }
            }
        }
    }
    let lets_through = matches!(
        s.default_action(),
        LinuxSeccompAction::ScmpActAllow
            | LinuxSeccompAction::ScmpActLog
            | LinuxSeccompAction::ScmpActTrace
    );
    let enosys = |a: ArchKind| {
        last[a as usize]
            .filter(|_| !lets_through)
            .map(|n| (n.saturating_add(1), RET_ERRNO | libc::ENOSYS as u32))
    };

    let mut g = Gen::default();
    g.stmt(LD_W_ABS, OFF_ARCH);
    let l64 = g.label();
    let l32 = g.label();
    g.jump(JEQ_K, AUDIT_ARCH_X86_64, Tgt::To(l64), Tgt::Next);
    if arches.contains(&ArchKind::I386) {
        g.jump(JEQ_K, AUDIT_ARCH_I386, Tgt::To(l32), Tgt::Next);
    }
    g.ret(RET_KILL_THREAD);

    // x86_64 and x32 share an audit architecture: one dispatch over both number ranges.
    g.place(l64);
    g.stmt(LD_W_ABS, OFF_NR);
    let mut fills = vec![];
    if let Some((from, ret)) = enosys(ArchKind::X86_64) {
        fills.push((from, X32_SYSCALL_BIT - 1, ret));
    }
    if arches.contains(&ArchKind::X32) {
        if let Some((from, ret)) = enosys(ArchKind::X32) {
            fills.push((from, u32::MAX, ret));
        }
    } else {
        fills.push((X32_SYSCALL_BIT, u32::MAX, RET_KILL_THREAD));
    }
    g.dispatch(&intervals(&rules64, &fills, default), true, default);

    if arches.contains(&ArchKind::I386) {
        g.place(l32);
        g.stmt(LD_W_ABS, OFF_NR);
        let fills: Vec<_> = enosys(ArchKind::I386)
            .map(|(from, ret)| (from, u32::MAX, ret))
            .into_iter()
            .collect();
        g.dispatch(&intervals(&rules32, &fills, default), false, default);
    }
    let program = g.assemble();
    if program.len() > MAX_INSNS {
        return Err(format!(
            "linux.seccomp: the filter needs {} BPF instructions, more than the kernel's {MAX_INSNS}",
            program.len()
        ));
    }
    Ok(Filter { program, flags })
}

/// What a range of syscall numbers does.
#[derive(Clone, Debug)]
enum Leaf<'a> {
    Ret(u32),
    Rules(&'a [Rule]),
}

/// The whole number space as `(start, leaf)` intervals: each ruled syscall its own, `fills`
/// (`from..=to` → a return value) elsewhere, the default action in the gaps; neighbours
/// that return the same value are merged.
fn intervals<'a>(
    rules: &'a BTreeMap<u32, Vec<Rule>>,
    fills: &[(u32, u32, u32)],
    default: u32,
) -> Vec<(u32, Leaf<'a>)> {
    let mut bounds = vec![0u32];
    for &nr in rules.keys() {
        bounds.push(nr);
        bounds.extend(nr.checked_add(1));
    }
    for &(from, to, _) in fills {
        bounds.push(from);
        bounds.extend(to.checked_add(1));
    }
    bounds.sort_unstable();
    bounds.dedup();
    let mut out: Vec<(u32, Leaf)> = Vec::new();
    for b in bounds {
        let leaf = match rules.get(&b) {
            Some(list) => match list.iter().find(|r| r.conds.is_empty()) {
                Some(r) => Leaf::Ret(r.ret),
                None => Leaf::Rules(list),
            },
            None => Leaf::Ret(
                fills
                    .iter()
                    .find(|(from, to, _)| (*from..=*to).contains(&b))
                    .map_or(default, |f| f.2),
            ),
        };
        match (out.last(), &leaf) {
            (Some((_, Leaf::Ret(prev))), Leaf::Ret(cur)) if prev == cur => {}
            _ => out.push((b, leaf)),
        }
    }
    out
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tgt {
    Next,
    To(usize),
}

#[derive(Clone, Copy, Debug)]
enum Ins {
    Stmt { code: u16, k: u32 },
    Jump { code: u16, k: u32, jt: Tgt, jf: Tgt },
    Ja(usize),
    Label(usize),
}

/// Code with symbolic forward labels; [`Gen::assemble`] resolves them, adding `ja`
/// trampolines where a conditional jump is longer than its 8-bit offset.
#[derive(Default)]
struct Gen {
    code: Vec<Ins>,
    labels: usize,
}

impl Gen {
    fn label(&mut self) -> usize {
        self.labels += 1;
        self.labels - 1
    }
    fn place(&mut self, l: usize) {
        self.code.push(Ins::Label(l));
    }
    fn stmt(&mut self, code: u16, k: u32) {
        self.code.push(Ins::Stmt { code, k });
    }
    fn ret(&mut self, k: u32) {
        self.stmt(RET_K, k);
    }
    fn jump(&mut self, code: u16, k: u32, jt: Tgt, jf: Tgt) {
        self.code.push(Ins::Jump { code, k, jt, jf });
    }

    /// Binary search over `iv` on the syscall number in A.
    fn dispatch(&mut self, iv: &[(u32, Leaf)], wide: bool, default: u32) {
        if let [(_, leaf)] = iv {
            match leaf {
                Leaf::Ret(k) => self.ret(*k),
                Leaf::Rules(rules) => self.rules(rules, wide, default),
            }
            return;
        }
        let mid = iv.len() / 2;
        let right = self.label();
        self.jump(JGE_K, iv[mid].0, Tgt::To(right), Tgt::Next);
        self.dispatch(&iv[..mid], wide, default);
        self.place(right);
        self.dispatch(&iv[mid..], wide, default);
    }

    /// Conditional rules of one syscall: the first that holds returns its action.
    fn rules(&mut self, rules: &[Rule], wide: bool, default: u32) {
        for r in rules {
            let fail = self.label();
            for c in &r.conds {
                self.cond(c, wide, fail);
            }
            self.ret(r.ret);
            self.place(fail);
        }
        self.ret(default);
    }

    /// Fall through when `c` holds, else jump to `fail`. `wide`: 64-bit arguments.
    fn cond(&mut self, c: &Cond, wide: bool, fail: usize) {
        let (lo, lo2) = (c.value as u32, c.value_two as u32);
        let (hi, hi2) = ((c.value >> 32) as u32, (c.value_two >> 32) as u32);
        let f = Tgt::To(fail);
        let n = Tgt::Next;
        let pass = self.label();
        let p = Tgt::To(pass);
        if wide {
            // The high words decide unless they are equal.
            self.stmt(LD_W_ABS, off_arg(c.index, true));
            match c.op {
                CmpOp::ScmpCmpEq => self.jump(JEQ_K, hi, n, f),
                CmpOp::ScmpCmpNe => self.jump(JEQ_K, hi, n, p),
                CmpOp::ScmpCmpMaskedEq => {
                    self.stmt(ALU_AND_K, hi);
                    self.jump(JEQ_K, hi2, n, f);
                }
                CmpOp::ScmpCmpGt | CmpOp::ScmpCmpGe => {
                    self.jump(JGT_K, hi, p, n);
                    self.jump(JEQ_K, hi, n, f);
                }
                CmpOp::ScmpCmpLt | CmpOp::ScmpCmpLe => {
                    self.jump(JGT_K, hi, f, n);
                    self.jump(JEQ_K, hi, n, p);
                }
            }
        }
        self.stmt(LD_W_ABS, off_arg(c.index, false));
        match c.op {
            CmpOp::ScmpCmpEq => self.jump(JEQ_K, lo, n, f),
            CmpOp::ScmpCmpNe => self.jump(JEQ_K, lo, f, n),
            CmpOp::ScmpCmpMaskedEq => {
                self.stmt(ALU_AND_K, lo);
                self.jump(JEQ_K, lo2, n, f);
            }
            CmpOp::ScmpCmpGt => self.jump(JGT_K, lo, n, f),
            CmpOp::ScmpCmpGe => self.jump(JGE_K, lo, n, f),
            CmpOp::ScmpCmpLt => self.jump(JGE_K, lo, f, n),
            CmpOp::ScmpCmpLe => self.jump(JGT_K, lo, f, n),
        }
        self.place(pass);
    }

    fn assemble(mut self) -> Vec<libc::sock_filter> {
        loop {
            let pos = self.positions();
            let far = |p: usize, t: Tgt| match t {
                Tgt::To(l) => pos.labels[l] - (p + 1) > 255,
                Tgt::Next => false,
            };
            let found = self
                .code
                .iter()
                .enumerate()
                .find_map(|(i, ins)| match *ins {
                    Ins::Jump { code, k, jt, jf } if far(pos.at[i], jt) || far(pos.at[i], jf) => {
                        Some((i, code, k, jt, jf, far(pos.at[i], jt), far(pos.at[i], jf)))
                    }
                    _ => None,
                });
            let Some((i, code, k, jt, jf, far_t, far_f)) = found else {
                return self.emit(&pos);
            };
            // jump → short hops to `ja` trampolines placed right after it.
            let after = self.label();
            let mut extra = Vec::new();
            let mut hop = |t: Tgt, is_far: bool, g: &mut Gen| match t {
                Tgt::To(l) if is_far => {
                    let tr = g.label();
                    extra.push(Ins::Label(tr));
                    extra.push(Ins::Ja(l));
                    Tgt::To(tr)
                }
                Tgt::Next => Tgt::To(after),
                t => t,
            };
            let jt = hop(jt, far_t, &mut self);
            let jf = hop(jf, far_f, &mut self);
            extra.push(Ins::Label(after));
            self.code[i] = Ins::Jump { code, k, jt, jf };
            self.code.splice(i + 1..i + 1, extra);
        }
    }

    fn positions(&self) -> Positions {
        let mut at = Vec::with_capacity(self.code.len());
        let mut labels = vec![usize::MAX; self.labels];
        let mut p = 0;
        for ins in &self.code {
            at.push(p);
            match ins {
                Ins::Label(l) => labels[*l] = p,
                _ => p += 1,
            }
        }
        Positions { at, labels }
    }

    fn emit(&self, pos: &Positions) -> Vec<libc::sock_filter> {
        let off = |p: usize, t: Tgt| match t {
            Tgt::Next => 0,
            Tgt::To(l) => pos.labels[l] - (p + 1),
        };
        let mut out = Vec::new();
        for (i, ins) in self.code.iter().enumerate() {
            let p = pos.at[i];
            let (code, jt, jf, k) = match *ins {
                Ins::Label(_) => continue,
                Ins::Stmt { code, k } => (code, 0, 0, k),
                Ins::Jump { code, k, jt, jf } => (code, off(p, jt) as u8, off(p, jf) as u8, k),
                Ins::Ja(l) => (JA, 0, 0, off(p, Tgt::To(l)) as u32),
            };
            out.push(libc::sock_filter { code, jt, jf, k });
        }
        out
    }
}

struct Positions {
    /// Program position of each `Ins` (a label: of the instruction after it).
    at: Vec<usize>,
    labels: Vec<usize>,
}

/// Install `f` on the calling thread. Without no_new_privs this needs CAP_SYS_ADMIN.
pub fn install(f: &Filter) -> Result<(), String> {
    let prog = libc::sock_fprog {
        len: f.program.len() as libc::c_ushort,
        filter: f.program.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: seccomp(2) reads the program through `prog`, which outlives the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            f.flags,
            &prog as *const libc::sock_fprog,
        )
    };
    if rc < 0 {
        return Err(format!(
            "installing the seccomp filter: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
