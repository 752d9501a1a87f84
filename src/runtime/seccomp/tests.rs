//! The compiled programs run in a small cBPF interpreter over `seccomp_data`.

use super::*;
use serde_json::json;

/// Run `prog` as the kernel would for one system call.
fn run(prog: &[libc::sock_filter], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
    let mut data = Vec::with_capacity(64);
    data.extend(nr.to_le_bytes());
    data.extend(arch.to_le_bytes());
    data.extend(0u64.to_le_bytes());
    for a in args {
        data.extend(a.to_le_bytes());
    }
    let (mut pc, mut acc) = (0usize, 0u32);
    loop {
        let i = prog[pc];
        pc += 1;
        let jump = |cond: bool| if cond { i.jt as usize } else { i.jf as usize };
        match i.code {
            LD_W_ABS => {
                let o = i.k as usize;
                acc = u32::from_le_bytes(data[o..o + 4].try_into().unwrap());
            }
            ALU_AND_K => acc &= i.k,
            JA => pc += i.k as usize,
            JEQ_K => pc += jump(acc == i.k),
            JGT_K => pc += jump(acc > i.k),
            JGE_K => pc += jump(acc >= i.k),
            RET_K => return i.k,
            c => panic!("unexpected opcode {c:#x}"),
        }
        assert!(pc < prog.len(), "ran off the end of the program");
    }
}

fn filter(v: serde_json::Value) -> Filter {
    compile(&serde_json::from_value(v).unwrap()).unwrap()
}

fn nr(name: &str) -> u32 {
    syscall_table::lookup(name).unwrap().x86_64.unwrap()
}

const EPERM: u32 = RET_ERRNO | 1;
const ENOSYS: u32 = RET_ERRNO | 38;
const X86: u32 = AUDIT_ARCH_X86_64;

#[test]
fn allow_list_with_default_errno_and_enosys_stub() {
    let f = filter(json!({
        "defaultAction": "SCMP_ACT_ERRNO",
        "syscalls": [{"names": ["read", "write", "no_such_call"], "action": "SCMP_ACT_ALLOW"},
                     {"names": ["getpid"], "action": "SCMP_ACT_ERRNO", "errnoRet": 13}]
    }));
    let p = &f.program;
    assert_eq!(run(p, X86, nr("read"), [0; 6]), RET_ALLOW);
    assert_eq!(run(p, X86, nr("write"), [0; 6]), RET_ALLOW);
    assert_eq!(run(p, X86, nr("getpid"), [0; 6]), RET_ERRNO | 13);
    assert_eq!(run(p, X86, nr("open"), [0; 6]), EPERM, "not listed");
    // getpid (39) is the largest number named: above it, ENOSYS.
    assert_eq!(run(p, X86, 40, [0; 6]), ENOSYS);
    assert_eq!(run(p, X86, 1000, [0; 6]), ENOSYS);
    // Architectures not listed: killed, and so is x32 on x86_64.
    assert_eq!(run(p, AUDIT_ARCH_I386, 3, [0; 6]), RET_KILL_THREAD);
    assert_eq!(run(p, 0xc000_00b7, 63, [0; 6]), RET_KILL_THREAD);
    assert_eq!(run(p, X86, X32_SYSCALL_BIT, [0; 6]), RET_KILL_THREAD);
    assert_eq!(f.flags, 0);
}

#[test]
fn i386_and_x32_use_their_own_numbers() {
    let f = filter(json!({
        "defaultAction": "SCMP_ACT_ERRNO",
        "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
        "syscalls": [{"names": ["read", "execve", "mmap2"], "action": "SCMP_ACT_ALLOW"}]
    }));
    let p = &f.program;
    assert_eq!(run(p, AUDIT_ARCH_I386, 3, [0; 6]), RET_ALLOW, "i386 read");
    assert_eq!(
        run(p, AUDIT_ARCH_I386, 192, [0; 6]),
        RET_ALLOW,
        "i386 mmap2"
    );
    assert_eq!(run(p, AUDIT_ARCH_I386, 0, [0; 6]), EPERM);
    assert_eq!(run(p, X86, X32_SYSCALL_BIT, [0; 6]), RET_ALLOW, "x32 read");
    assert_eq!(
        run(p, X86, X32_SYSCALL_BIT | 520, [0; 6]),
        RET_ALLOW,
        "x32 execve"
    );
    assert_eq!(
        run(p, X86, X32_SYSCALL_BIT | 59, [0; 6]),
        EPERM,
        "x86_64's execve number"
    );
    assert_eq!(run(p, X86, X32_SYSCALL_BIT | 521, [0; 6]), ENOSYS);
    assert_eq!(run(p, X86, 59, [0; 6]), RET_ALLOW);
    assert_eq!(
        run(p, X86, 60, [0; 6]),
        ENOSYS,
        "above x86_64's largest (execve)"
    );
}

#[test]
fn allowing_default_has_no_enosys_stub_and_skips_rules_equal_to_it() {
    let f = filter(json!({
        "defaultAction": "SCMP_ACT_ALLOW",
        "syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1},
                     {"names": ["read"], "action": "SCMP_ACT_ALLOW"},
                     {"names": ["kill"], "action": "SCMP_ACT_KILL_PROCESS"}]
    }));
    let p = &f.program;
    assert_eq!(run(p, X86, nr("mkdir"), [0; 6]), EPERM);
    assert_eq!(run(p, X86, nr("mkdirat"), [0; 6]), EPERM);
    assert_eq!(run(p, X86, nr("kill"), [0; 6]), RET_KILL_PROCESS);
    assert_eq!(run(p, X86, 1000, [0; 6]), RET_ALLOW);
    assert_eq!(run(p, X86, nr("read"), [0; 6]), RET_ALLOW);
}

/// Every operator against a reference evaluation, on values around the interesting edges
/// of both 32-bit words.
#[test]
fn comparisons_are_unsigned_64_bit() {
    let v: u64 = 0x0000_0005_8000_0000;
    let probes = [
        0,
        1,
        v - 1,
        v,
        v + 1,
        v & 0xffff_ffff,
        v | 0xffff_ffff,
        (v + (1 << 32)) & !0xffff_ffff,
        v - (1 << 32),
        u64::MAX,
    ];
    type Reference = fn(u64, u64) -> bool;
    let ops: [(&str, Reference); 7] = [
        ("SCMP_CMP_EQ", |a, b| a == b),
        ("SCMP_CMP_NE", |a, b| a != b),
        ("SCMP_CMP_LT", |a, b| a < b),
        ("SCMP_CMP_LE", |a, b| a <= b),
        ("SCMP_CMP_GT", |a, b| a > b),
        ("SCMP_CMP_GE", |a, b| a >= b),
        ("SCMP_CMP_MASKED_EQ", |a, b| a & b == 0x0000_0004_8000_0000),
    ];
    for (op, reference) in ops {
        let f = filter(json!({
            "defaultAction": "SCMP_ACT_ERRNO",
            "syscalls": [{"names": ["ioctl"], "action": "SCMP_ACT_ALLOW",
                          "args": [{"index": 2, "value": v, "valueTwo": 0x0000_0004_8000_0000u64, "op": op}]}]
        }));
        for a in probes {
            let got = run(&f.program, X86, nr("ioctl"), [0, 0, a, 0, 0, 0]) == RET_ALLOW;
            assert_eq!(got, reference(a, v), "{op}: arg {a:#x} against {v:#x}");
        }
    }
}

#[test]
fn i386_compares_the_low_word() {
    let f = filter(json!({
        "defaultAction": "SCMP_ACT_ERRNO",
        "architectures": ["SCMP_ARCH_X86"],
        "syscalls": [{"names": ["personality"], "action": "SCMP_ACT_ALLOW",
                      "args": [{"index": 0, "value": 0xffff_ffffu64, "op": "SCMP_CMP_EQ"}]}]
    }));
    assert_eq!(
        run(
            &f.program,
            AUDIT_ARCH_I386,
            136,
            [0xffff_ffff, 0, 0, 0, 0, 0]
        ),
        RET_ALLOW
    );
    assert_eq!(
        run(&f.program, AUDIT_ARCH_I386, 136, [8, 0, 0, 0, 0, 0]),
        EPERM
    );
}

#[test]
fn conditions_and_across_arguments_or_on_the_same_one() {
    let f = filter(json!({
        "defaultAction": "SCMP_ACT_ERRNO",
        "syscalls": [
            {"names": ["socket"], "action": "SCMP_ACT_ALLOW",
             "args": [{"index": 0, "value": 1, "op": "SCMP_CMP_EQ"}, {"index": 1, "value": 2, "op": "SCMP_CMP_EQ"}]},
            {"names": ["personality"], "action": "SCMP_ACT_ALLOW",
             "args": [{"index": 0, "value": 0, "op": "SCMP_CMP_EQ"}, {"index": 0, "value": 8, "op": "SCMP_CMP_EQ"}]}
        ]
    }));
    let p = &f.program;
    let s = nr("socket");
    assert_eq!(run(p, X86, s, [1, 2, 0, 0, 0, 0]), RET_ALLOW);
    assert_eq!(run(p, X86, s, [1, 3, 0, 0, 0, 0]), EPERM);
    assert_eq!(run(p, X86, s, [2, 2, 0, 0, 0, 0]), EPERM);
    let pers = nr("personality");
    assert_eq!(run(p, X86, pers, [0; 6]), RET_ALLOW);
    assert_eq!(run(p, X86, pers, [8, 0, 0, 0, 0, 0]), RET_ALLOW);
    assert_eq!(run(p, X86, pers, [9, 0, 0, 0, 0, 0]), EPERM);
}

#[test]
fn first_matching_rule_wins_and_unconditional_beats_conditional() {
    let f = filter(json!({
        "defaultAction": "SCMP_ACT_ALLOW",
        "syscalls": [
            {"names": ["kill"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1,
             "args": [{"index": 1, "value": 9, "op": "SCMP_CMP_EQ"}]},
            {"names": ["kill"], "action": "SCMP_ACT_ERRNO", "errnoRet": 3,
             "args": [{"index": 1, "value": 8, "op": "SCMP_CMP_GE"}]},
            {"names": ["tkill"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1,
             "args": [{"index": 1, "value": 9, "op": "SCMP_CMP_EQ"}]},
            {"names": ["tkill"], "action": "SCMP_ACT_TRAP"}
        ]
    }));
    let p = &f.program;
    assert_eq!(run(p, X86, nr("kill"), [1, 9, 0, 0, 0, 0]), RET_ERRNO | 1);
    assert_eq!(run(p, X86, nr("kill"), [1, 10, 0, 0, 0, 0]), RET_ERRNO | 3);
    assert_eq!(run(p, X86, nr("kill"), [1, 2, 0, 0, 0, 0]), RET_ALLOW);
    assert_eq!(run(p, X86, nr("tkill"), [1, 9, 0, 0, 0, 0]), RET_TRAP);
}

/// Enough conditional code between a branch and its target to need `ja` trampolines.
#[test]
fn long_jumps_go_through_trampolines() {
    let names = "read write open close stat fstat lstat poll lseek mmap mprotect munmap brk \
                 ioctl pread64 pwrite64 readv writev access pipe select sched_yield mremap \
                 msync mincore madvise shmget shmat shmctl dup";
    let names: Vec<&str> = names.split_whitespace().collect();
    let args: Vec<serde_json::Value> = (0..6)
        .map(|i| json!({"index": i, "value": 100 + i, "op": "SCMP_CMP_LE"}))
        .collect();
    let f = filter(json!({
        "defaultAction": "SCMP_ACT_ERRNO",
        "syscalls": [{"names": names, "action": "SCMP_ACT_ALLOW", "args": args},
                     {"names": ["getpid"], "action": "SCMP_ACT_LOG"}]
    }));
    assert!(f.program.len() > 600, "{}", f.program.len());
    for n in &names {
        assert_eq!(
            run(&f.program, X86, nr(n), [100, 101, 102, 103, 104, 105]),
            RET_ALLOW,
            "{n}"
        );
        assert_eq!(
            run(&f.program, X86, nr(n), [100, 101, 102, 103, 104, 106]),
            EPERM,
            "{n}"
        );
    }
    assert_eq!(run(&f.program, X86, nr("getpid"), [0; 6]), RET_LOG);
}

#[test]
fn flags_and_refusals_name_the_field() {
    let f = filter(json!({"defaultAction": "SCMP_ACT_ALLOW",
                          "flags": ["SECCOMP_FILTER_FLAG_LOG", "SECCOMP_FILTER_FLAG_SPEC_ALLOW", "SECCOMP_FILTER_FLAG_TSYNC"]}));
    assert_eq!(f.flags, FLAG_LOG | FLAG_SPEC_ALLOW);
    let err = |v: serde_json::Value| {
        compile(&serde_json::from_value(v).unwrap())
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        err(json!({"defaultAction": "SCMP_ACT_ALLOW",
                   "syscalls": [{"names": ["read"], "action": "SCMP_ACT_ERRNO"},
                                {"names": ["write"], "action": "SCMP_ACT_NOTIFY"}]})),
        "linux.seccomp.syscalls[1].action: SCMP_ACT_NOTIFY is not supported"
    );
    assert_eq!(
        err(json!({"defaultAction": "SCMP_ACT_NOTIFY"})),
        "linux.seccomp.defaultAction: SCMP_ACT_NOTIFY is not supported"
    );
    assert!(err(json!({"defaultAction": "SCMP_ACT_ALLOW",
                       "flags": ["SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV"]}))
    .starts_with("linux.seccomp.flags: SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV"));
    assert_eq!(
        err(json!({"defaultAction": "SCMP_ACT_ALLOW",
                   "syscalls": [{"names": ["read"], "action": "SCMP_ACT_ERRNO",
                                 "args": [{"index": 6, "value": 0, "op": "SCMP_CMP_EQ"}]}]})),
        "linux.seccomp.syscalls[0].args[0].index: 6 is out of range (0-5)"
    );
}
