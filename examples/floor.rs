//! The floor of a pod's start on this kernel (scripts/bench's "floor" rows): only the
//! kernel work that any runtime must do to run N busybox containers as podinit does, with
//! none of podinit's own (no manifest, bundle, status, socket, logs, probes, supervisor
//! loop), in one static process.
//!
//! `floor ROOTFS WORKDIR N` (cgroup v1 or hybrid) makes a pod cgroup in every v1
//! hierarchy (below the cgroups it runs in, as podinit), then a sandbox process in new pid, net, ipc, uts and
//! mount namespaces (loopback up, hostname set). The sandbox starts N containers one after
//! the other, each in new mount and pid namespaces: its cgroups, an overlay of ROOTFS, the
//! bundle's mounts, devices and masked and read-only paths, pivot_root, then `/bin/true`.
//! It waits for all of them; the outer process then removes every cgroup. Left out, so that
//! this stays a lower bound: credentials and capabilities, /etc/hosts and the other files
//! kubelet mounts, the supervisor's leaf cgroup, device cgroup rules, /sys/fs/cgroup in the
//! container. An error is reported with its context, and the cgroups and work directory
//! made are removed.

use std::ffi::CString;
use std::fs;
use std::path::{Path, PathBuf};

fn die(what: &str) -> ! {
    eprintln!("floor: {what}: {}", std::io::Error::last_os_error());
    // SAFETY: _exit ends the process (and a vfork-like child without running atexit).
    unsafe { libc::_exit(1) }
}

fn c(s: &str) -> CString {
    CString::new(s).unwrap()
}

fn check(r: libc::c_int, what: &str) {
    if r < 0 {
        die(what)
    }
}

fn mount(src: &str, dst: &str, fstype: &str, flags: libc::c_ulong, data: &str) {
    let (s, d, t, o) = (c(src), c(dst), c(fstype), c(data));
    let data_ptr = if data.is_empty() {
        std::ptr::null()
    } else {
        o.as_ptr().cast()
    };
    // SAFETY: valid C strings for the call's duration.
    let r = unsafe { libc::mount(s.as_ptr(), d.as_ptr(), t.as_ptr(), flags, data_ptr) };
    check(r, &format!("mount {fstype} at {dst}"));
}

/// The cgroup directories this process is in, one per v1 hierarchy (those podinit uses on
/// v1 and hybrid machines). None on a pure v2 machine.
fn own_cgroups() -> Vec<PathBuf> {
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    // Each v1 hierarchy: its mount point and its controllers (the super options).
    let mut v1: Vec<(String, Vec<String>)> = Vec::new();
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let f: Vec<&str> = left.split(' ').collect();
        let r: Vec<&str> = right.split(' ').collect();
        if r[0] == "cgroup" && f.len() > 4 && r.len() > 2 {
            v1.push((
                f[4].to_string(),
                r[2].split(',').map(String::from).collect(),
            ));
        }
    }
    let own = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let mut dirs = Vec::new();
    for line in own.lines() {
        let mut p = line.splitn(3, ':');
        let (Some(_), Some(ctrls), Some(path)) = (p.next(), p.next(), p.next()) else {
            continue;
        };
        if ctrls.is_empty() {
            continue; // the unified hierarchy: podinit makes no cgroup there on hybrid
        }
        let want: Vec<&str> = ctrls.split(',').collect();
        if let Some((mnt, _)) = v1
            .iter()
            .find(|(_, opts)| want.iter().all(|w| opts.iter().any(|o| o == w)))
        {
            dirs.push(Path::new(mnt).join(path.trim_start_matches('/')));
        }
    }
    dirs
}

/// Make cgroup `d`; in a v1 cpuset hierarchy a new cgroup has no CPUs nor memory nodes
/// until given its parent's.
fn make_cgroup(d: &Path) -> Result<(), String> {
    fs::create_dir(d).map_err(|e| format!("mkdir {}: {e}", d.display()))?;
    let parent = d.parent().unwrap();
    for f in ["cpuset.cpus", "cpuset.mems"] {
        if let Ok(v) = fs::read(parent.join(f)) {
            fs::write(d.join(f), v).map_err(|e| format!("{f} of {}: {e}", d.display()))?;
        }
    }
    Ok(())
}

/// Remove the pod's cgroups (containers' first) and its work directory.
fn clean_up(pod: &[PathBuf], n: usize, work: &str) {
    for d in pod {
        for i in 0..n {
            let _ = fs::remove_dir(d.join(format!("c{i}")));
        }
        let _ = fs::remove_dir(d);
    }
    let _ = fs::remove_dir_all(work);
}

struct Container {
    cgroups: Vec<CString>,
    merged: String,
}

/// The container: everything between its clone and its exec. Runs on its own stack in the
/// sandbox's address space (vfork-like): what it allocates is on the suspended parent's heap.
extern "C" fn container(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: the parent passes a Container that outlives the vfork-like child's exec.
    let ct = unsafe { &*(arg as *const Container) };
    unsafe {
        for procs in &ct.cgroups {
            let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if fd < 0 || libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                libc::_exit(101);
            }
            libc::close(fd);
        }
    }
    let m = &ct.merged;
    let r = |p: &str| format!("{m}{p}");
    let nosuid = libc::MS_NOSUID;
    let nodev = libc::MS_NODEV;
    let noexec = libc::MS_NOEXEC;
    mount("proc", &r("/proc"), "proc", nosuid | nodev | noexec, "");
    mount(
        "tmpfs",
        &r("/dev"),
        "tmpfs",
        nosuid | libc::MS_STRICTATIME,
        "mode=755,size=65536k",
    );
    for d in ["/dev/pts", "/dev/shm", "/dev/mqueue"] {
        // SAFETY: a valid C string.
        unsafe { libc::mkdir(c(&r(d)).as_ptr(), 0o755) };
    }
    mount(
        "devpts",
        &r("/dev/pts"),
        "devpts",
        nosuid | noexec,
        "newinstance,ptmxmode=0666,mode=0620,gid=5",
    );
    mount(
        "shm",
        &r("/dev/shm"),
        "tmpfs",
        nosuid | noexec | nodev,
        "mode=1777,size=65536k",
    );
    mount(
        "mqueue",
        &r("/dev/mqueue"),
        "mqueue",
        nosuid | noexec | nodev,
        "",
    );
    mount(
        "sysfs",
        &r("/sys"),
        "sysfs",
        nosuid | noexec | nodev | libc::MS_RDONLY,
        "",
    );
    for (name, major, minor) in [
        ("null", 1, 3),
        ("zero", 1, 5),
        ("full", 1, 7),
        ("random", 1, 8),
        ("urandom", 1, 9),
        ("tty", 5, 0),
    ] {
        // SAFETY: a valid C string.
        let rc = unsafe {
            libc::mknod(
                c(&r(&format!("/dev/{name}"))).as_ptr(),
                libc::S_IFCHR | 0o666,
                libc::makedev(major, minor),
            )
        };
        check(rc, name);
    }
    for (target, link) in [
        ("/proc/self/fd", "/dev/fd"),
        ("/proc/self/fd/0", "/dev/stdin"),
        ("/proc/self/fd/1", "/dev/stdout"),
        ("/proc/self/fd/2", "/dev/stderr"),
        ("pts/ptmx", "/dev/ptmx"),
    ] {
        // SAFETY: valid C strings.
        check(
            unsafe { libc::symlink(c(target).as_ptr(), c(&r(link)).as_ptr()) },
            link,
        );
    }
    // The bundle's masked and read-only paths, where they exist.
    for p in [
        "/proc/acpi",
        "/proc/asound",
        "/proc/kcore",
        "/proc/keys",
        "/proc/latency_stats",
        "/proc/timer_list",
        "/proc/timer_stats",
        "/proc/sched_debug",
        "/sys/firmware",
        "/proc/scsi",
    ] {
        match fs::metadata(r(p)) {
            Ok(md) if md.is_dir() => mount("tmpfs", &r(p), "tmpfs", libc::MS_RDONLY, ""),
            Ok(_) => mount(&r("/dev/null"), &r(p), "", libc::MS_BIND, ""),
            Err(_) => {}
        }
    }
    for p in [
        "/proc/bus",
        "/proc/fs",
        "/proc/irq",
        "/proc/sys",
        "/proc/sysrq-trigger",
    ] {
        if fs::metadata(r(p)).is_ok() {
            mount(&r(p), &r(p), "", libc::MS_BIND | libc::MS_REC, "");
            mount(
                "",
                &r(p),
                "",
                libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY,
                "",
            );
        }
    }
    let (dot, merged) = (c("."), c(m));
    // SAFETY: valid C strings; pivot_root(".", ".") then detaching the old root, as runc.
    unsafe {
        check(libc::chdir(merged.as_ptr()), "chdir");
        check(
            libc::syscall(libc::SYS_pivot_root, dot.as_ptr(), dot.as_ptr()) as i32,
            "pivot_root",
        );
        check(
            libc::umount2(dot.as_ptr(), libc::MNT_DETACH),
            "umount old root",
        );
        check(libc::chdir(c("/").as_ptr()), "chdir /");
        let prog = c("/bin/true");
        let argv = [prog.as_ptr(), std::ptr::null()];
        let path = c("PATH=/bin");
        let envp = [path.as_ptr(), std::ptr::null()];
        libc::execve(prog.as_ptr(), argv.as_ptr(), envp.as_ptr());
    }
    die("exec /bin/true")
}

fn sandbox(rootfs: &str, work: &str, pod: &[PathBuf], n: usize) -> ! {
    // SAFETY: plain syscalls with valid arguments.
    unsafe {
        check(
            libc::mount(
                std::ptr::null(),
                c("/").as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ),
            "make / private",
        );
        check(
            libc::sethostname(b"floor".as_ptr().cast(), 5),
            "sethostname",
        );
        let s = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        let mut ifr: libc::ifreq = std::mem::zeroed();
        ifr.ifr_name[..2].copy_from_slice(&[b'l' as i8, b'o' as i8]);
        ifr.ifr_ifru.ifru_flags = (libc::IFF_UP | libc::IFF_RUNNING) as i16;
        check(libc::ioctl(s, libc::SIOCSIFFLAGS, &ifr), "loopback up");
        libc::close(s);
    }
    let mut pids = Vec::new();
    let mut stacks = Vec::new();
    let mut cts = Vec::new();
    for i in 0..n {
        let mut cgroups = Vec::new();
        for p in pod {
            let d = p.join(format!("c{i}"));
            // The outer process removes what the sandbox made when it fails.
            make_cgroup(&d).unwrap_or_else(|e| panic!("{e}"));
            // `tasks`, not `cgroup.procs`: moving a whole process takes the global threadgroup
            // lock, whose write side waits for an RCU grace period (as podinit avoids).
            cgroups.push(c(d.join("tasks").to_str().unwrap()));
        }
        let dir = format!("{work}/c{i}");
        for s in ["upper", "work", "merged"] {
            fs::create_dir_all(format!("{dir}/{s}")).unwrap();
        }
        let merged = format!("{dir}/merged");
        mount(
            "overlay",
            &merged,
            "overlay",
            0,
            &format!("lowerdir={rootfs},upperdir={dir}/upper,workdir={dir}/work"),
        );
        cts.push(Box::new(Container { cgroups, merged }));
        let mut stack = vec![0u8; 256 << 10];
        let ct: *const Container = &*cts[i];
        // SAFETY: the child runs `container` on its own stack and execs or exits; with
        // CLONE_VFORK the parent resumes only then, so the shared memory is not raced.
        let pid = unsafe {
            libc::clone(
                container,
                stack.as_mut_ptr().add(stack.len()).cast(),
                libc::CLONE_VM
                    | libc::CLONE_VFORK
                    | libc::CLONE_NEWNS
                    | libc::CLONE_NEWPID
                    | libc::SIGCHLD,
                ct as *mut libc::c_void,
            )
        };
        check(pid, "clone a container");
        stacks.push(stack);
        pids.push(pid);
    }
    let mut failed = 0;
    for pid in pids {
        let mut st = 0;
        // SAFETY: our child.
        unsafe { libc::waitpid(pid, &mut st, 0) };
        if st != 0 {
            eprintln!("floor: container {pid} ended with wait status {st:#x}");
            failed += 1;
        }
    }
    // SAFETY: ending the sandbox (its namespaces go with it).
    unsafe { libc::_exit(if failed > 0 { 1 } else { 0 }) }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 {
        eprintln!("usage: floor ROOTFS WORKDIR N");
        std::process::exit(2);
    }
    let (rootfs, work) = (&args[1], &args[2]);
    let Ok(n) = args[3].parse::<usize>() else {
        eprintln!("floor: N must be a number of containers, not {:?}", args[3]);
        std::process::exit(2);
    };
    let name = format!("floor-{}", std::process::id());
    let pod: Vec<PathBuf> = own_cgroups().iter().map(|d| d.join(&name)).collect();
    if pod.is_empty() {
        // podinit's containers are born in their cgroup there (CLONE_INTO_CGROUP), which
        // this program does not do: it would not be a lower bound.
        eprintln!("floor: no cgroup v1 hierarchy: the floor is measured on v1 and hybrid machines");
        std::process::exit(2);
    }
    let work = format!("{work}/{name}");
    for (k, d) in pod.iter().enumerate() {
        if let Err(e) = make_cgroup(d) {
            eprintln!("floor: {e}");
            clean_up(&pod[..k], 0, &work);
            std::process::exit(1);
        }
    }
    if let Err(e) = fs::create_dir_all(&work) {
        eprintln!("floor: {work}: {e}");
        clean_up(&pod, 0, &work);
        std::process::exit(1);
    }
    let flags = libc::CLONE_NEWPID
        | libc::CLONE_NEWNET
        | libc::CLONE_NEWIPC
        | libc::CLONE_NEWUTS
        | libc::CLONE_NEWNS;
    // SAFETY: a fork-like clone (no CLONE_VM): the child has its own copy of memory.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone,
            (flags | libc::SIGCHLD) as libc::c_ulong,
            0usize,
            0usize,
            0usize,
            0usize,
        )
    } as i32;
    if pid < 0 {
        let e = std::io::Error::last_os_error();
        clean_up(&pod, 0, &work);
        eprintln!("floor: clone the sandbox: {e}");
        std::process::exit(1);
    }
    if pid == 0 {
        sandbox(rootfs, &work, &pod, n);
    }
    let mut st = 0;
    // SAFETY: our child.
    unsafe { libc::waitpid(pid, &mut st, 0) };
    clean_up(&pod, n, &work);
    if st != 0 {
        eprintln!("floor: the sandbox failed ({st:#x})");
        std::process::exit(1);
    }
}
