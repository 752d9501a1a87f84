//! Which device nodes a container may open or create: the device cgroup. Without it a
//! container with CAP_MKNOD (in the default set) could `mknod` the node's disk and read it.
//!
//! The rules are the OCI spec's `linux.resources.devices`, in order, the last match winning
//! (cgroup v1's semantics). On v1 they are written to `devices.deny` / `devices.allow`; on
//! v2, which has no device files, they are compiled here into a
//! `BPF_PROG_TYPE_CGROUP_DEVICE` program (the kernel part is in `cgroup.rs`).

use oci_spec::runtime::LinuxDeviceCgroup;

/// One rule: `kind` is `'a'` (all), `'c'` or `'b'`; `None` is the `*` wildcard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub allow: bool,
    pub kind: char,
    pub major: Option<i64>,
    pub minor: Option<i64>,
    /// Any of `r`, `w`, `m`.
    pub access: String,
}

impl Rule {
    /// `None` for a FIFO rule: FIFOs are no devices, the cgroup does not control them.
    pub fn from_oci(d: &LinuxDeviceCgroup) -> Option<Rule> {
        use oci_spec::runtime::LinuxDeviceType::*;
        let kind = match d.typ() {
            Some(C) | Some(U) => 'c',
            Some(B) => 'b',
            Some(A) | None => 'a',
            Some(P) => return None,
        };
        Some(Rule {
            allow: d.allow(),
            kind,
            major: d.major().filter(|m| *m >= 0),
            minor: d.minor().filter(|m| *m >= 0),
            access: d.access().clone().unwrap_or_else(|| "rwm".into()),
        })
    }

    /// The v1 line: `c 1:3 rwm`.
    pub fn v1_line(&self) -> String {
        let n = |v: Option<i64>| v.map_or("*".to_string(), |v| v.to_string());
        if self.kind == 'a' {
            return format!("a *:* {}", self.access);
        }
        format!(
            "{} {}:{} {}",
            self.kind,
            n(self.major),
            n(self.minor),
            self.access
        )
    }
}

/// The default set of an OCI runtime (runc's `AllowedDevices`): everything denied, then
/// mknod of any node, and use of the standard ones.
pub fn defaults() -> Vec<Rule> {
    let rule = |kind, major, minor: Option<i64>, access: &str| Rule {
        allow: true,
        kind,
        major,
        minor,
        access: access.into(),
    };
    let mut v = vec![Rule {
        allow: false,
        kind: 'a',
        major: None,
        minor: None,
        access: "rwm".into(),
    }];
    v.push(rule('c', None, None, "m"));
    v.push(rule('b', None, None, "m"));
    for (major, minor) in [
        (1, 3),
        (1, 5),
        (1, 7),
        (1, 8),
        (1, 9),
        (5, 0),
        (5, 1),
        (5, 2),
    ] {
        // null, zero, full, random, urandom, tty, console, ptmx
        v.push(rule('c', Some(major), Some(minor), "rwm"));
    }
    // /dev/pts/*
    v.push(rule('c', Some(136), None, "rwm"));
    v
}

/// A device node of the host, as an OCI `linux.devices` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostNode {
    pub path: std::path::PathBuf,
    pub kind: char,
    pub major: u64,
    pub minor: u64,
    pub mode: u32,
}

/// Every character and block device under the host's /dev, for a privileged container
/// (containerd's `HostDevices`): not the per-container ones (pts, shm, mqueue) nor links.
pub fn host_nodes() -> Vec<HostNode> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let mut out = Vec::new();
    let mut dirs = vec![std::path::PathBuf::from("/dev")];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            let Ok(md) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            let ft = md.file_type();
            if ft.is_dir() {
                let skip = ["pts", "shm", "mqueue", "fd", ".lxc", ".lxd-mounts", ".udev"];
                if dir.as_os_str() != "/dev" || !skip.iter().any(|s| e.file_name() == *s) {
                    dirs.push(path);
                }
                continue;
            }
            let kind = if ft.is_char_device() {
                'c'
            } else if ft.is_block_device() {
                'b'
            } else {
                continue;
            };
            // /dev/console is the container's own (its terminal, if any).
            if path.as_os_str() == "/dev/console" {
                continue;
            }
            let rdev = md.rdev();
            out.push(HostNode {
                path,
                kind,
                major: libc::major(rdev) as u64,
                minor: libc::minor(rdev) as u64,
                mode: md.mode() & 0o7777,
            });
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

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

#[cfg(test)]
mod tests {
    use super::*;

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
        let all = Rule {
            allow: true,
            kind: 'a',
            major: None,
            minor: None,
            access: "rwm".into(),
        };
        rules.push(all.clone());
        let p = program(&rules);
        assert_eq!(p.len(), 8);
        assert!(run(&p, DEV_BLOCK, ACC_READ, 8, 0));
        assert_eq!(all.v1_line(), "a *:* rwm");
        assert_eq!(defaults()[10].v1_line(), "c 5:2 rwm");
        assert_eq!(defaults()[11].v1_line(), "c 136:* rwm");
    }
}
