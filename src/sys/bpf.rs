//! The cgroup v2 device filter: device rules compiled into a `BPF_PROG_TYPE_CGROUP_DEVICE`
//! program, and its attachment to a cgroup directory.

use std::fs;
use std::io;
use std::path::Path;

use super::devices::Rule;

// eBPF encoding (linux/bpf.h).
const LDX_MEM_W: u8 = 0x61;
const ALU64_AND_K: u8 = 0x57;
const ALU64_RSH_K: u8 = 0x77;
const ALU64_MOV_K: u8 = 0xb7;
const ALU64_MOV_X: u8 = 0xbf;
const JMP_JNE_K: u8 = 0x55;
const JMP_JEQ_K: u8 = 0x15;
const JMP_EXIT: u8 = 0x95;
const DEV_BLOCK: i32 = 1;
const DEV_CHAR: i32 = 2;
const ACC_MKNOD: i32 = 1;
const ACC_READ: i32 = 2;
const ACC_WRITE: i32 = 4;

/// One `struct bpf_insn`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: (src << 4) | (dst & 0x0f),
        off,
        imm,
    }
}

fn access_bits(access: &str) -> i32 {
    access.chars().fold(0, |acc, c| {
        acc | match c {
            'm' => ACC_MKNOD,
            'r' => ACC_READ,
            'w' => ACC_WRITE,
            _ => 0,
        }
    })
}

/// The v2 program for `rules`: r2 = type, r3 = access, r4 = major, r5 = minor from the
/// `bpf_cgroup_dev_ctx`; rules are tried last to first, the first that matches decides;
/// an `a` rule decides everything (nothing before it can matter); no match denies.
pub fn program(rules: &[Rule]) -> Vec<Insn> {
    let mut p = vec![
        insn(LDX_MEM_W, 2, 1, 0, 0),
        insn(ALU64_AND_K, 2, 0, 0, 0xffff),
        insn(LDX_MEM_W, 3, 1, 0, 0),
        insn(ALU64_RSH_K, 3, 0, 0, 16),
        insn(LDX_MEM_W, 4, 1, 4, 0),
        insn(LDX_MEM_W, 5, 1, 8, 0),
    ];
    for r in rules.iter().rev() {
        let verdict = [
            insn(ALU64_MOV_K, 0, 0, 0, i32::from(r.allow)),
            insn(JMP_EXIT, 0, 0, 0, 0),
        ];
        if r.kind == 'a' && access_bits(&r.access) == ACC_MKNOD | ACC_READ | ACC_WRITE {
            p.extend(verdict);
            return p;
        }
        // Each test jumps past the rest of this block (to the next rule) when it fails.
        let mut tests: Vec<(u8, u8, i32)> = Vec::new(); // (op, register, operand)
        if r.kind != 'a' {
            tests.push((
                JMP_JNE_K,
                2,
                if r.kind == 'b' { DEV_BLOCK } else { DEV_CHAR },
            ));
        }
        if let Some(m) = r.major {
            tests.push((JMP_JNE_K, 4, m as i32));
        }
        if let Some(m) = r.minor {
            tests.push((JMP_JNE_K, 5, m as i32));
        }
        let mut block = Vec::new();
        for (op, reg, val) in tests {
            block.push((insn(op, reg, 0, 0, val), true));
        }
        let bits = access_bits(&r.access);
        if r.allow {
            // Allowed only if every access asked for is the rule's: (access & !rule) == 0.
            let outside = !bits & (ACC_MKNOD | ACC_READ | ACC_WRITE);
            if outside != 0 {
                block.push((insn(ALU64_MOV_X, 1, 3, 0, 0), false));
                block.push((insn(ALU64_AND_K, 1, 0, 0, outside), false));
                block.push((insn(JMP_JNE_K, 1, 0, 0, 0), true));
            }
        } else {
            // Denied if any access asked for is the rule's: (access & rule) != 0.
            block.push((insn(ALU64_MOV_X, 1, 3, 0, 0), false));
            block.push((insn(ALU64_AND_K, 1, 0, 0, bits), false));
            block.push((insn(JMP_JEQ_K, 1, 0, 0, 0), true));
        }
        let len = block.len() + verdict.len();
        for (i, (mut ins, jumps)) in block.into_iter().enumerate() {
            if jumps {
                ins.off = (len - i - 1) as i16;
            }
            p.push(ins);
        }
        p.extend(verdict);
    }
    p.extend([insn(ALU64_MOV_K, 0, 0, 0, 0), insn(JMP_EXIT, 0, 0, 0, 0)]);
    p
}

/// Load `prog` as a `BPF_PROG_TYPE_CGROUP_DEVICE` program and attach it to the cgroup
/// directory `dir`, beside any the parent has (`BPF_F_ALLOW_MULTI`: all must allow).
pub fn attach_device_program(dir: &Path, prog: &[Insn]) -> io::Result<()> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    const BPF_PROG_LOAD: libc::c_long = 5;
    const BPF_PROG_ATTACH: libc::c_long = 8;
    const BPF_PROG_TYPE_CGROUP_DEVICE: u32 = 15;
    const BPF_CGROUP_DEVICE: u32 = 6;
    const BPF_F_ALLOW_MULTI: u32 = 2;
    // The leading fields of `union bpf_attr` for each command; the kernel zero-fills the rest.
    #[repr(C, align(8))]
    struct ProgLoad {
        prog_type: u32,
        insn_cnt: u32,
        insns: u64,
        license: u64,
        log_level: u32,
        log_size: u32,
        log_buf: u64,
        kern_version: u32,
        prog_flags: u32,
        prog_name: [u8; 16],
        prog_ifindex: u32,
        expected_attach_type: u32,
    }
    #[repr(C, align(8))]
    struct ProgAttach {
        target_fd: u32,
        attach_bpf_fd: u32,
        attach_type: u32,
        attach_flags: u32,
    }
    let license = c"Apache-2.0";
    let mut name = [0u8; 16];
    name[..7].copy_from_slice(b"podinit");
    let load = ProgLoad {
        prog_type: BPF_PROG_TYPE_CGROUP_DEVICE,
        insn_cnt: prog.len() as u32,
        insns: prog.as_ptr() as u64,
        license: license.as_ptr() as u64,
        log_level: 0,
        log_size: 0,
        log_buf: 0,
        kern_version: 0,
        prog_flags: 0,
        prog_name: name,
        prog_ifindex: 0,
        expected_attach_type: BPF_CGROUP_DEVICE,
    };
    // SAFETY: bpf(2) with a fully initialised attribute struct that outlives the call and
    // points at `prog` and `license`, both alive here.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_PROG_LOAD,
            &load as *const ProgLoad,
            std::mem::size_of::<ProgLoad>(),
        )
    };
    if fd < 0 {
        let errno = nix::errno::Errno::last();
        return Err(super::Error::syscall("loading", "the device program", errno).into());
    }
    // SAFETY: a new fd that only we own.
    let prog_fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    let cg = fs::File::open(dir)?;
    let attach = ProgAttach {
        target_fd: cg.as_raw_fd() as u32,
        attach_bpf_fd: prog_fd.as_raw_fd() as u32,
        attach_type: BPF_CGROUP_DEVICE,
        attach_flags: BPF_F_ALLOW_MULTI,
    };
    // SAFETY: as above; both fds are open for the call. The attachment keeps the program
    // alive once our fd is closed, until the cgroup is removed.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_PROG_ATTACH,
            &attach as *const ProgAttach,
            std::mem::size_of::<ProgAttach>(),
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::devices::defaults;

    /// Run the program on a device access, as the kernel would.
    fn run(p: &[Insn], kind: i32, access: i32, major: i32, minor: i32) -> bool {
        let ctx = [((access << 16) | kind) as u32, major as u32, minor as u32];
        let mut r = [0u64; 11];
        let mut pc = 0usize;
        loop {
            let i = p[pc];
            let (dst, src) = ((i.regs & 0xf) as usize, (i.regs >> 4) as usize);
            pc += 1;
            match i.code {
                LDX_MEM_W => r[dst] = u64::from(ctx[i.off as usize / 4]),
                ALU64_AND_K => r[dst] &= i.imm as u64,
                ALU64_RSH_K => r[dst] >>= i.imm,
                ALU64_MOV_K => r[dst] = i.imm as u64,
                ALU64_MOV_X => r[dst] = r[src],
                JMP_JNE_K => {
                    if r[dst] != i.imm as u64 {
                        pc += i.off as usize;
                    }
                }
                JMP_JEQ_K => {
                    if r[dst] == i.imm as u64 {
                        pc += i.off as usize;
                    }
                }
                JMP_EXIT => return r[0] == 1,
                c => panic!("opcode {c:#x}"),
            }
        }
    }

    #[test]
    fn the_defaults_allow_the_standard_nodes_and_mknod_only() {
        let p = program(&defaults());
        let rw = ACC_READ | ACC_WRITE;
        assert!(run(&p, DEV_CHAR, rw, 1, 3), "/dev/null");
        assert!(run(&p, DEV_CHAR, rw, 136, 7), "a pty");
        assert!(run(&p, DEV_BLOCK, ACC_MKNOD, 8, 0), "mknod of a disk");
        assert!(!run(&p, DEV_BLOCK, ACC_READ, 8, 0), "reading a disk");
        assert!(!run(&p, DEV_CHAR, ACC_READ, 1, 1), "/dev/mem");
        assert!(!run(&p, DEV_CHAR, ACC_READ | ACC_MKNOD, 1, 1));
    }

    #[test]
    fn later_rules_win_and_allow_all_short_circuits() {
        let mut rules = defaults();
        rules.push(Rule {
            allow: false,
            kind: 'c',
            major: Some(1),
            minor: Some(3),
            access: "w".into(),
        });
        let p = program(&rules);
        assert!(run(&p, DEV_CHAR, ACC_READ, 1, 3));
        assert!(!run(&p, DEV_CHAR, ACC_WRITE, 1, 3));
        assert!(
            !run(&p, DEV_CHAR, ACC_READ | ACC_WRITE, 1, 3),
            "any denied access denies"
        );
        rules.push(Rule::every_device(true));
        let p = program(&rules);
        assert_eq!(p.len(), 8);
        assert!(run(&p, DEV_BLOCK, ACC_READ, 8, 0));
    }
}
