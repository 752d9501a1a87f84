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
use super::{Error, Result};

mod codegen;
use codegen::{intervals, Gen, Tgt};

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
fn action(a: LinuxSeccompAction, errno_ret: Option<u32>, field: &str) -> Result<u32> {
    use LinuxSeccompAction::*;
    let data = |base: u32| match errno_ret {
        None => Ok(base | libc::EPERM as u32),
        Some(e) if e <= 0xffff => Ok(base | e),
        Some(e) => Err(Error::Spec(format!(
            "{field}: errnoRet {e} is out of range (0-65535)"
        ))),
    };
    match a {
        ScmpActKill | ScmpActKillThread => Ok(RET_KILL_THREAD),
        ScmpActKillProcess => Ok(RET_KILL_PROCESS),
        ScmpActTrap => Ok(RET_TRAP),
        ScmpActErrno => data(RET_ERRNO),
        ScmpActTrace => data(RET_TRACE),
        ScmpActLog => Ok(RET_LOG),
        ScmpActAllow => Ok(RET_ALLOW),
        ScmpActNotify => Err(Error::Spec(format!(
            "{field}: SCMP_ACT_NOTIFY is not supported"
        ))),
    }
}

/// Translate a profile. Errors name the profile field (`linux.seccomp.syscalls[3].action`).
pub fn compile(s: &LinuxSeccomp) -> Result<Filter> {
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
                return Err(Error::Spec("linux.seccomp.flags: SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV needs SCMP_ACT_NOTIFY, which is not supported".into()))
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
                return Err(Error::Spec(format!(
                    "{field}.args[{j}].index: {} is out of range (0-5)",
                    a.index()
                )));
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
        return Err(Error::Spec(format!(
            "linux.seccomp: the filter needs {} BPF instructions, more than the kernel's {MAX_INSNS}",
            program.len()
        )));
    }
    Ok(Filter { program, flags })
}

/// Install `f` on the calling thread. Without no_new_privs this needs CAP_SYS_ADMIN.
pub fn install(f: &Filter) -> Result<()> {
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
        return Err(Error::os(
            "installing the seccomp filter",
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
