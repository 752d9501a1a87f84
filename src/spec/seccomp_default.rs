//! `seccompProfile: RuntimeDefault`: containerd's default profile
//! (`contrib/seccomp/seccomp_default.go`, which follows moby's), for amd64 — the
//! architecture podinit is built for. An allow-list; everything else fails with EPERM,
//! syscalls newer than the list with ENOSYS (the runtime's stub). Some calls depend on the
//! container's bounding capabilities, so the profile is made after they are final.

use oci_spec::runtime::{
    Arch, LinuxSeccomp, LinuxSeccompAction, LinuxSeccompArgBuilder, LinuxSeccompBuilder,
    LinuxSeccompOperator, LinuxSyscall, LinuxSyscallBuilder,
};
use oci_spec::OciSpecError;

/// Allowed for every container.
const ALLOWED: &str = "
accept accept4 access adjtimex alarm bind brk cachestat capget capset chdir chmod chown
chown32 clock_adjtime clock_adjtime64 clock_getres clock_getres_time64 clock_gettime
clock_gettime64 clock_nanosleep clock_nanosleep_time64 close close_range connect
copy_file_range creat dup dup2 dup3 epoll_create epoll_create1 epoll_ctl epoll_ctl_old
epoll_pwait epoll_pwait2 epoll_wait epoll_wait_old eventfd eventfd2 execve execveat exit
exit_group faccessat faccessat2 fadvise64 fadvise64_64 fallocate fanotify_mark fchdir
fchmod fchmodat fchmodat2 fchown fchown32 fchownat fcntl fcntl64 fdatasync fgetxattr
flistxattr flock fork fremovexattr fsetxattr fstat fstat64 fstatat64 fstatfs fstatfs64
fsync ftruncate ftruncate64 futex futex_requeue futex_time64 futex_wait futex_waitv
futex_wake futimesat getcpu getcwd getdents getdents64 getegid getegid32 geteuid
geteuid32 getgid getgid32 getgroups getgroups32 getitimer getpeername getpgid getpgrp
getpid getppid getpriority getrandom getresgid getresgid32 getresuid getresuid32
getrlimit get_robust_list getrusage getsid getsockname getsockopt get_thread_area gettid
gettimeofday getuid getuid32 getxattr getxattrat inotify_add_watch inotify_init
inotify_init1 inotify_rm_watch io_cancel ioctl io_destroy io_getevents io_pgetevents
io_pgetevents_time64 ioprio_get ioprio_set io_setup io_submit ipc kill landlock_add_rule
landlock_create_ruleset landlock_restrict_self lchown lchown32 lgetxattr link linkat
listen listmount listxattr listxattrat llistxattr _llseek lremovexattr lseek lsetxattr
lsm_get_self_attr lsm_list_modules lsm_set_self_attr lstat lstat64 madvise membarrier
memfd_create memfd_secret mincore mkdir mkdirat mknod mknodat mlock mlock2 mlockall
map_shadow_stack mmap mmap2 mprotect mq_getsetattr mq_notify mq_open mq_timedreceive
mq_timedreceive_time64 mq_timedsend mq_timedsend_time64 mq_unlink mremap mseal msgctl
msgget msgrcv msgsnd msync munlock munlockall munmap name_to_handle_at nanosleep
newfstatat _newselect open openat openat2 pause pidfd_open pidfd_send_signal pipe pipe2
pkey_alloc pkey_free pkey_mprotect poll ppoll ppoll_time64 prctl pread64 preadv preadv2
prlimit64 process_mrelease pselect6 pselect6_time64 pwrite64 pwritev pwritev2 read
readahead readlink readlinkat readv recv recvfrom recvmmsg recvmmsg_time64 recvmsg
remap_file_pages removexattr removexattrat rename renameat renameat2 restart_syscall
rmdir rseq rt_sigaction rt_sigpending rt_sigprocmask rt_sigqueueinfo rt_sigreturn
rt_sigsuspend rt_sigtimedwait rt_sigtimedwait_time64 rt_tgsigqueueinfo sched_getaffinity
sched_getattr sched_getparam sched_get_priority_max sched_get_priority_min
sched_getscheduler sched_rr_get_interval sched_rr_get_interval_time64 sched_setaffinity
sched_setattr sched_setparam sched_setscheduler sched_yield seccomp select semctl semget
semop semtimedop semtimedop_time64 send sendfile sendfile64 sendmmsg sendmsg sendto
setfsgid setfsgid32 setfsuid setfsuid32 setgid setgid32 setgroups setgroups32 setitimer
setpgid setpriority setregid setregid32 setresgid setresgid32 setresuid setresuid32
setreuid setreuid32 setrlimit set_robust_list setsid setsockopt set_thread_area
set_tid_address setuid setuid32 setxattr setxattrat shmat shmctl shmdt shmget shutdown
sigaltstack signalfd signalfd4 sigprocmask sigreturn socketcall socketpair splice stat
stat64 statfs statfs64 statmount statx symlink symlinkat sync sync_file_range syncfs
sysinfo tee tgkill time timer_create timer_delete timer_getoverrun timer_gettime
timer_gettime64 timer_settime timer_settime64 timerfd_create timerfd_gettime
timerfd_gettime64 timerfd_settime timerfd_settime64 times tkill truncate truncate64
ugetrlimit umask uname unlink unlinkat uretprobe utime utimensat utimensat_time64 utimes
vfork vmsplice wait4 waitid waitpid write writev";

/// From Linux 4.8, where ptrace can no longer be used to get around seccomp.
const FROM_LINUX_4_8: &str = "process_vm_readv process_vm_writev ptrace";

/// Only on amd64.
const AMD64: &str = "arch_prctl modify_ldt";

/// Allowed when the capability is in the bounding set.
const BY_CAPABILITY: &[(&str, &str)] = &[
    ("CAP_DAC_READ_SEARCH", "open_by_handle_at"),
    (
        "CAP_SYS_ADMIN",
        "bpf clone clone3 fanotify_init fsconfig fsmount fsopen fspick lookup_dcookie mount \
         mount_setattr move_mount open_tree perf_event_open quotactl quotactl_fd setdomainname \
         sethostname setns syslog umount umount2 unshare",
    ),
    ("CAP_SYS_BOOT", "reboot"),
    ("CAP_SYS_CHROOT", "chroot"),
    ("CAP_SYS_MODULE", "delete_module init_module finit_module"),
    ("CAP_SYS_PACCT", "acct"),
    (
        "CAP_SYS_PTRACE",
        "kcmp pidfd_getfd process_madvise process_vm_readv process_vm_writev ptrace",
    ),
    ("CAP_SYS_RAWIO", "iopl ioperm"),
    (
        "CAP_SYS_TIME",
        "settimeofday stime clock_settime clock_settime64",
    ),
    ("CAP_SYS_TTY_CONFIG", "vhangup"),
    (
        "CAP_SYS_NICE",
        "get_mempolicy mbind set_mempolicy set_mempolicy_home_node",
    ),
    ("CAP_SYSLOG", "syslog"),
    ("CAP_BPF", "bpf"),
    ("CAP_PERFMON", "perf_event_open"),
];

/// `personality(2)` personas allowed: PER_LINUX, PER_LINUX32, UNAME26, PER_LINUX32|UNAME26,
/// and the query 0xffffffff.
const PERSONAS: [u64; 5] = [0, 0x8, 0x20000, 0x20008, 0xffff_ffff];

fn allow(names: &str) -> Result<LinuxSyscall, OciSpecError> {
    LinuxSyscallBuilder::default()
        .names(
            names
                .split_whitespace()
                .map(str::to_string)
                .collect::<Vec<_>>(),
        )
        .action(LinuxSeccompAction::ScmpActAllow)
        .build()
}

fn allow_if(
    name: &str,
    op: LinuxSeccompOperator,
    value: u64,
    value_two: Option<u64>,
) -> Result<LinuxSyscall, OciSpecError> {
    let mut arg = LinuxSeccompArgBuilder::default()
        .index(0usize)
        .value(value)
        .op(op);
    if let Some(v) = value_two {
        arg = arg.value_two(v);
    }
    LinuxSyscallBuilder::default()
        .names(vec![name.to_string()])
        .action(LinuxSeccompAction::ScmpActAllow)
        .args(vec![arg.build()?])
        .build()
}

/// The profile for a container whose bounding set is `bounding` (`CAP_…` names), on a
/// kernel of version `kernel` (major, minor).
pub fn profile(
    bounding: &[String],
    kernel: Option<(u32, u32)>,
) -> Result<LinuxSeccomp, OciSpecError> {
    use LinuxSeccompOperator::*;
    let mut rules = vec![allow(ALLOWED)?];
    // socket(2) for every family but AF_ALG (38) and AF_VSOCK (40), as three single
    // conditions (conditions on one argument are alternatives).
    rules.push(allow_if("socket", ScmpCmpLt, libc::AF_ALG as u64, None)?);
    rules.push(allow_if(
        "socket",
        ScmpCmpEq,
        libc::AF_ALG as u64 + 1,
        None,
    )?);
    rules.push(allow_if("socket", ScmpCmpGt, libc::AF_VSOCK as u64, None)?);
    for p in PERSONAS {
        rules.push(allow_if("personality", ScmpCmpEq, p, None)?);
    }
    if kernel.is_some_and(|k| k >= (4, 8)) {
        rules.push(allow(FROM_LINUX_4_8)?);
    }
    rules.push(allow(AMD64)?);
    let mut admin = false;
    for cap in bounding {
        if let Some((_, names)) = BY_CAPABILITY.iter().find(|(c, _)| c == cap) {
            admin |= cap == "CAP_SYS_ADMIN";
            rules.push(allow(names)?);
        }
    }
    if !admin {
        // clone without any namespace flag; clone3 (whose flags are out of seccomp's reach
        // in a struct) fails with ENOSYS so that libcs fall back to clone.
        let namespaces = libc::CLONE_NEWNS
            | libc::CLONE_NEWUTS
            | libc::CLONE_NEWIPC
            | libc::CLONE_NEWUSER
            | libc::CLONE_NEWPID
            | libc::CLONE_NEWNET
            | libc::CLONE_NEWCGROUP;
        rules.push(allow_if(
            "clone",
            ScmpCmpMaskedEq,
            namespaces as u64,
            Some(0),
        )?);
        rules.push(
            LinuxSyscallBuilder::default()
                .names(vec!["clone3".to_string()])
                .action(LinuxSeccompAction::ScmpActErrno)
                .errno_ret(libc::ENOSYS as u32)
                .build()?,
        );
    }
    LinuxSeccompBuilder::default()
        .default_action(LinuxSeccompAction::ScmpActErrno)
        .architectures(vec![
            Arch::ScmpArchX86_64,
            Arch::ScmpArchX86,
            Arch::ScmpArchX32,
        ])
        .syscalls(rules)
        .build()
}

/// The running kernel's (major, minor), from uname(2).
pub fn kernel_version() -> Option<(u32, u32)> {
    let release = crate::sys::proc::kernel_release()?;
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::seccomp::{compile, Filter};

    fn names(p: &LinuxSeccomp) -> Vec<String> {
        p.syscalls()
            .iter()
            .flatten()
            .filter(|r| r.action() == LinuxSeccompAction::ScmpActAllow && r.args().is_none())
            .flat_map(|r| r.names().clone())
            .collect()
    }

    fn compiled(p: &LinuxSeccomp) -> Filter {
        compile(p).unwrap()
    }

    #[test]
    fn capabilities_widen_the_allow_list() {
        let plain = profile(&["CAP_CHOWN".into()], Some((6, 1))).unwrap();
        let n = names(&plain);
        assert!(n.len() > 360, "{}", n.len());
        for name in [
            "read",
            "mkdir",
            "execve",
            "ptrace",
            "arch_prctl",
            "name_to_handle_at",
        ] {
            assert!(n.contains(&name.to_string()), "{name}");
        }
        for name in [
            "mount", "unshare", "setns", "chroot", "reboot", "keyctl", "clone3",
        ] {
            assert!(!n.contains(&name.to_string()), "{name}");
        }
        let json = serde_json::to_value(&plain).unwrap();
        let rules = json["syscalls"].as_array().unwrap();
        assert!(rules
            .iter()
            .any(|r| r["names"][0] == "clone3" && r["errnoRet"] == 38));
        assert!(rules
            .iter()
            .any(|r| r["names"][0] == "clone" && r["args"][0]["value"] == 0x7e02_0000));

        let admin = profile(
            &["CAP_SYS_ADMIN".into(), "CAP_SYS_CHROOT".into()],
            Some((4, 7)),
        )
        .unwrap();
        let n = names(&admin);
        for name in ["mount", "unshare", "setns", "clone", "clone3", "chroot"] {
            assert!(n.contains(&name.to_string()), "{name}");
        }
        assert!(!n.contains(&"ptrace".to_string()), "kernel before 4.8");
        assert!(!admin
            .syscalls()
            .iter()
            .flatten()
            .any(|r| r.errno_ret() == Some(38)));
    }

    #[test]
    fn compiles_within_the_kernels_limit() {
        for caps in [
            vec![],
            vec!["CAP_SYS_ADMIN".to_string(), "CAP_SYS_PTRACE".to_string()],
        ] {
            let f = compiled(&profile(&caps, kernel_version()).unwrap());
            assert!(f.program.len() < 4096 / 2, "{}", f.program.len());
        }
    }

    #[test]
    fn kernel_version_parses() {
        let (major, _) = kernel_version().unwrap();
        assert!(major >= 3);
    }
}
