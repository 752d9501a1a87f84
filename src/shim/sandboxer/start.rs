//! Starting a sandbox's PID 1. The shim runs threads (ttrpc), and a process that forks
//! into new namespaces must not: the shim runs its own binary as `sandbox-init` (one
//! thread), which joins and makes the namespaces, forks the pause as PID 1 of the pod's
//! pid namespace, says its pid on stdout and exits. The pause then comes to the shim, its
//! subreaper, like a container's process after `runc create`. The pause waits on its
//! stdin for the shim's word that it has recorded it ([`Pid1::recorded`]): a shim killed
//! before then closes that pipe, and the pause ends instead of living on unknown.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::process::{ChildStdin, Command, Stdio};
use std::time::Duration;

use podinit::sys::pause::SandboxNamespaces;

use super::super::error::Error;
use super::super::service::Inner;

/// `sandbox-init` takes a second at most; one that hangs is reported, not waited for.
const INIT_LIMIT: Duration = Duration::from_secs(30);

/// The command line `sandbox-init` reads back with [`parse`].
fn args(ns: &SandboxNamespaces) -> Vec<OsString> {
    let mut a: Vec<OsString> = vec!["sandbox-init".into()];
    if let Some(p) = &ns.netns {
        a.extend(["--netns".into(), p.into()]);
    }
    for (on, flag) in [
        (ns.new_pid, "--pid"),
        (ns.new_ipc, "--ipc"),
        (ns.new_uts, "--uts"),
    ] {
        if on {
            a.push(flag.into());
        }
    }
    if let Some(h) = &ns.hostname {
        a.extend(["--hostname".into(), h.into()]);
    }
    for (k, v) in &ns.sysctls {
        a.extend(["--sysctl".into(), format!("{k}={v}").into()]);
    }
    if let Some(c) = &ns.cgroup {
        if c.v2 {
            a.push("--cgroup-v2".into());
        }
        for d in &c.dirs {
            a.extend(["--cgroup".into(), d.into()]);
        }
    }
    a
}

/// [`args`] read back (without `sandbox-init` itself).
fn parse(args: impl IntoIterator<Item = OsString>) -> Result<SandboxNamespaces, Error> {
    let mut ns = SandboxNamespaces::default();
    let mut it = args.into_iter();
    let text = |v: Option<OsString>, flag: &str| {
        v.and_then(|v| v.into_string().ok())
            .ok_or_else(|| Error::Invalid(format!("{flag}: a value is missing")))
    };
    while let Some(a) = it.next() {
        match a.to_str() {
            Some("--netns") => {
                let path = it.next();
                ns.netns = Some(
                    path.ok_or_else(|| Error::Invalid("--netns: a path is missing".into()))?
                        .into(),
                )
            }
            Some("--pid") => ns.new_pid = true,
            Some("--ipc") => ns.new_ipc = true,
            Some("--uts") => ns.new_uts = true,
            Some("--hostname") => ns.hostname = Some(text(it.next(), "--hostname")?),
            Some("--cgroup-v2") => ns.cgroup.get_or_insert_with(Default::default).v2 = true,
            Some("--cgroup") => {
                let dir = it
                    .next()
                    .ok_or_else(|| Error::Invalid("--cgroup: a directory is missing".into()))?;
                ns.cgroup
                    .get_or_insert_with(Default::default)
                    .dirs
                    .push(dir.into());
            }
            Some("--sysctl") => {
                let kv = text(it.next(), "--sysctl")?;
                let (k, v) = kv
                    .split_once('=')
                    .ok_or_else(|| Error::Invalid(format!("--sysctl {kv}: not KEY=VALUE")))?;
                ns.sysctls.push((k.to_string(), v.to_string()));
            }
            _ => {
                return Err(Error::Invalid(format!(
                    "{a:?}: not an argument of sandbox-init"
                )))
            }
        }
    }
    Ok(ns)
}

/// The binary's `sandbox-init` part: the pause's pid on stdout, or why not on stderr.
pub fn init_main(args: impl IntoIterator<Item = OsString>) -> ! {
    let result = parse(args).and_then(|ns| {
        podinit::sys::pause::start_sandbox(&ns).map_err(|e| Error::Setup(e.to_string()))
    });
    match result {
        Ok(pid) => {
            println!("{pid}");
            std::process::exit(0)
        }
        Err(e) => {
            eprintln!("containerd-shim-podinit-v1 sandbox-init: {e}");
            std::process::exit(1)
        }
    }
}

/// A sandbox's PID 1 that waits for the shim's word before it serves.
pub struct Pid1 {
    pub pid: i32,
    word: ChildStdin,
}

impl Pid1 {
    /// Tells the PID 1 that the shim has recorded it, so that it lives on; dropping a
    /// `Pid1` without this ends it.
    pub fn recorded(mut self) -> std::io::Result<()> {
        self.word.write_all(b"\n")
    }
}

/// Runs `sandbox-init` for `ns`: the pause, waiting for [`Pid1::recorded`].
pub fn pid1(inner: &Inner, ns: &SandboxNamespaces) -> Result<Pid1, Error> {
    let mut child = Command::new(&inner.exe)
        .args(args(ns))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            Error::io(
                format_args!("running {} sandbox-init", inner.exe.display()),
                e,
            )
        })?;
    let word = child.stdin.take();
    let (mut out, mut err) = (String::new(), String::new());
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_string(&mut out);
    }
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    let exit = inner
        .reaper
        .wait_for(child.id() as i32, INIT_LIMIT)
        .ok_or_else(|| Error::Other(format!("sandbox-init: no exit after {INIT_LIMIT:?}")))?;
    if exit.status != 0 {
        return Err(Error::Other(match err.trim() {
            "" => format!("sandbox-init exited with status {}", exit.status),
            e => e
                .trim_start_matches("containerd-shim-podinit-v1 sandbox-init: ")
                .to_string(),
        }));
    }
    let pid = out
        .trim()
        .parse()
        .map_err(|_| Error::Other(format!("sandbox-init answered {out:?}, not a pid")))?;
    let word = word.ok_or_else(|| Error::Other("sandbox-init: no stdin to answer on".into()))?;
    Ok(Pid1 { pid, word })
}

#[cfg(test)]
mod tests {
    use super::*;
    use podinit::sys::pause::SandboxCgroup;

    #[test]
    fn the_namespaces_go_through_the_command_line_unchanged() {
        let ns = SandboxNamespaces {
            netns: Some("/var/run/netns/cni-1".into()),
            new_pid: true,
            new_ipc: false,
            new_uts: true,
            hostname: Some("web-0".into()),
            sysctls: vec![("net/ipv4/ip_forward".into(), "1".into())],
            cgroup: Some(SandboxCgroup {
                v2: false,
                dirs: vec![
                    "/sys/fs/cgroup/cpu/pods/sb".into(),
                    "/sys/fs/cgroup/memory/pods/sb".into(),
                ],
            }),
        };
        let a = args(&ns);
        assert_eq!(a[0], "sandbox-init");
        assert_eq!(parse(a.into_iter().skip(1)).unwrap(), ns);
        assert_eq!(parse([]).unwrap(), SandboxNamespaces::default());
        let e = parse(["--sysctl".into(), "x".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("KEY=VALUE"), "{e}");
        let e = parse(["--bogus".into()]).unwrap_err().to_string();
        assert!(e.contains("--bogus"), "{e}");
    }
}
