//! Running podinit's runc front-end (`src/runc/`) as containerd's runc shim runs runc: as
//! a child process, one per verb. The shim is multi-threaded (ttrpc), and a runtime that
//! clones container processes must not be: each verb runs in a fresh, single-threaded
//! process of this same binary (`… runc VERB`), whose container processes then come to
//! the shim as their subreaper.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use oci_spec::runtime::Spec;

use super::error::{Error, Result};
use super::reaper::Reaper;

/// No verb takes this long; one that does is reported, not waited for forever.
const VERB_LIMIT: Duration = Duration::from_secs(60);

/// The descriptor `create` finds the handed spec on: the first after the standard streams.
const SPEC_FD: RawFd = 3;

pub struct Runc {
    exe: PathBuf,
    /// The shim's binary on a read-only mount of its own (`podinit::sys::exe`), made once:
    /// each verb runs from it, sealed against the containers it makes from the start,
    /// instead of sealing itself with one more exec. `None` where the binary is sealed
    /// already or may not be mounted (the verb then seals itself as `podinit runc` does).
    sealed: Option<OwnedFd>,
    /// runc's `--root`: the containers' state, shared by every shim of a namespace.
    pub root: PathBuf,
    reaper: Arc<Reaper>,
}

/// The three standard streams of a verb's process (create and exec hand them on to the
/// container's process).
pub struct Streams {
    pub stdin: Option<OwnedFd>,
    pub stdout: Option<OwnedFd>,
    pub stderr: Option<OwnedFd>,
}

impl Streams {
    pub fn none() -> Streams {
        Streams {
            stdin: None,
            stdout: None,
            stderr: None,
        }
    }
}

fn stdio(fd: Option<OwnedFd>) -> Stdio {
    fd.map_or_else(Stdio::null, Stdio::from)
}

impl Runc {
    pub fn new(root: PathBuf, reaper: Arc<Reaper>) -> Result<Runc> {
        let exe =
            std::env::current_exe().map_err(|e| Error::io("finding the shim's own binary", e))?;
        // Above the descriptors a verb is handed (its stdio, the spec at 3).
        let sealed = podinit::sys::exe::sealed_mount()
            .and_then(|m| m.map(|fd| podinit::sys::fd::dup_above(&fd, 64)).transpose())
            .unwrap_or_else(|e| {
                // EPERM: no CAP_SYS_ADMIN here, and each verb seals a copy of itself.
                if e.raw_os_error() != Some(libc::EPERM) {
                    super::say::warn(format_args!(
                        "a read-only mount of {} for the runtime's verbs: {e}",
                        exe.display()
                    ));
                }
                None
            });
        Ok(Runc {
            exe,
            sealed,
            root,
            reaper,
        })
    }

    /// Runs `runc --root ROOT --log LOG --log-format json ARGS` with `streams` (absent
    /// ones are /dev/null); on failure runc's last error (from the log, as containerd
    /// reads it) as one line, [`Error::Runc`].
    pub fn run(&self, log: &Path, args: &[&str], streams: Streams) -> Result<()> {
        self.verb(log, args, streams, None, false).map(drop)
    }

    /// Like [`Runc::run`], for `create` with the bundle's spec as the shim has read and
    /// changed it, handed on an inherited descriptor (`runc::SPEC_FD_ENV`) so that
    /// the verb reads no config.json.
    pub fn create(&self, log: &Path, args: &[&str], streams: Streams, spec: &Spec) -> Result<()> {
        let fd = hand(spec)?;
        self.verb(log, args, streams, Some(fd.as_fd()), false)
            .map(drop)
    }

    /// Like [`Runc::run`], for a verb whose standard output is its answer (`ps`). Never
    /// for create or exec: the container's process would hold the pipe open.
    pub fn output(&self, log: &Path, args: &[&str]) -> Result<String> {
        self.verb(log, args, Streams::none(), None, true)
    }

    /// runc's `kill` of container `id` (`all`: every process in its cgroup), in the shim's
    /// own process: the verb clones nothing and waits for no child, and a process of its
    /// own would cost a fork and exec on the path of every StopPodSandbox. Its error is
    /// the one the verb logs.
    pub fn kill(&self, id: &str, signal: u32, all: bool) -> Result<()> {
        let runc = |e: podinit::runc::Error| Error::Runc(e.to_string());
        let sig = podinit::runc::kill::parse_signal(&signal.to_string()).map_err(runc)?;
        podinit::runc::kill::signal(&self.state_root(), id, sig, all).map_err(runc)
    }

    /// runc's `delete --force` of container `id`, in the shim's own process when `here`
    /// (the container has no poststop hook and no systemd unit, whose waits the shim's
    /// reaper would race: `podinit::runc::delete::waits_for_others`), else as the verb.
    pub fn delete(&self, log: &Path, id: &str, here: bool) -> Result<()> {
        if !here {
            return self.run(log, &["delete", "--force", id], Streams::none());
        }
        podinit::runc::delete::delete(&self.state_root(), id, true)
            .map_err(|e| Error::Runc(e.to_string()))
    }

    /// The state root as the runc front-end's own type.
    pub fn state_root(&self) -> podinit::runc::state::Root {
        podinit::runc::state::Root(self.root.clone())
    }

    fn verb(
        &self,
        log: &Path,
        args: &[&str],
        streams: Streams,
        spec: Option<BorrowedFd>,
        capture_out: bool,
    ) -> Result<String> {
        let mut argv: Vec<OsString> = vec![self.exe.clone().into(), "runc".into()];
        argv.extend([
            "--root".into(),
            self.root.clone().into(),
            "--log".into(),
            log.into(),
            "--log-format".into(),
            "json".into(),
        ]);
        argv.extend(args.iter().map(OsString::from));
        let spawn_err = |e: std::io::Error| {
            Error::Runc(format!(
                "running {} runc {}: {e}",
                self.exe.display(),
                args.join(" ")
            ))
        };
        let mut out = String::new();
        let pid = match spec {
            // The spec must be moved to its descriptor before the exec, which std's
            // Command does in a fork of the whole shim: posix_spawn does not fork it.
            Some(fd) => self.spawn_with_spec(argv, streams, fd).map_err(spawn_err)?,
            None => {
                let mut cmd = match &self.sealed {
                    // The fd is close-on-exec: the kernel opens the path before it closes it.
                    Some(fd) => Command::new(format!("/proc/self/fd/{}", fd.as_raw_fd())),
                    None => Command::new(&self.exe),
                };
                std::os::unix::process::CommandExt::arg0(&mut cmd, &argv[0]);
                cmd.args(&argv[1..])
                    .stdin(stdio(streams.stdin))
                    .stdout(if capture_out {
                        Stdio::piped()
                    } else {
                        stdio(streams.stdout)
                    })
                    .stderr(stdio(streams.stderr));
                let mut child = cmd.spawn().map_err(spawn_err)?;
                drop(cmd);
                if let Some(mut o) = child.stdout.take() {
                    let _ = o.read_to_string(&mut out);
                }
                child.id() as i32
            }
        };
        let exit = self.reaper.wait_for(pid, VERB_LIMIT).ok_or_else(|| {
            Error::Runc(format!(
                "runc {}: no exit after {VERB_LIMIT:?}",
                args.join(" ")
            ))
        })?;
        if exit.status == 0 {
            return Ok(out);
        }
        Err(Error::Runc(last_error(log).unwrap_or_else(|| {
            format!("runc {} exited with status {}", args.join(" "), exit.status)
        })))
    }

    /// The verb `argv` with `streams` as its stdio (/dev/null for those absent) and the
    /// spec on [`SPEC_FD`]; its pid.
    fn spawn_with_spec(
        &self,
        argv: Vec<OsString>,
        streams: Streams,
        spec: BorrowedFd,
    ) -> std::io::Result<i32> {
        let null = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/null")?;
        let path = match &self.sealed {
            Some(fd) => PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd())),
            None => self.exe.clone(),
        };
        fn or<'a>(s: &'a Option<OwnedFd>, null: &'a std::fs::File) -> BorrowedFd<'a> {
            s.as_ref().map_or(null.as_fd(), |f| f.as_fd())
        }
        podinit::sys::spawn::spawn(&podinit::sys::spawn::Program {
            path: &path,
            argv,
            env: vec![(
                podinit::runc::SPEC_FD_ENV.into(),
                SPEC_FD.to_string().into(),
            )],
            fds: vec![
                (or(&streams.stdin, &null), 0),
                (or(&streams.stdout, &null), 1),
                (or(&streams.stderr, &null), 2),
                (spec, SPEC_FD),
            ],
        })
    }
}

/// A memfd holding `spec` as JSON: a pipe could fill before the verb reads it.
fn hand(spec: &Spec) -> Result<OwnedFd> {
    use nix::sys::memfd::{memfd_create, MFdFlags};
    let text =
        serde_json::to_vec(spec).map_err(|e| Error::Other(format!("handing the spec on: {e}")))?;
    let fd = memfd_create("podinit-spec", MFdFlags::MFD_CLOEXEC)
        .map_err(|e| Error::io("handing the spec on: memfd_create", e.into()))?;
    let mut file = std::fs::File::from(fd);
    file.write_all(&text)
        .map_err(|e| Error::io("handing the spec on: writing its memfd", e))?;
    Ok(OwnedFd::from(file))
}

/// The message of the last `error` line of a runc JSON log.
pub fn last_error(log: &Path) -> Option<String> {
    let text = std::fs::read_to_string(log).ok()?;
    text.lines().rev().find_map(|l| {
        let v: serde_json::Value = serde_json::from_str(l).ok()?;
        (v.get("level")?.as_str()? == "error").then(|| v.get("msg")?.as_str().map(String::from))?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_error_line_is_the_reason() {
        let dir = std::env::temp_dir().join(format!("podinit-shim-log-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("log.json");
        std::fs::write(
            &log,
            "{\"level\":\"error\",\"msg\":\"first\",\"time\":\"t\"}\n{\"level\":\"warning\",\"msg\":\"w\",\"time\":\"t\"}\n{\"level\":\"error\",\"msg\":\"exec: \\\"nope\\\": executable file not found in $PATH\",\"time\":\"t\"}\n",
        )
        .unwrap();
        assert_eq!(
            last_error(&log).unwrap(),
            "exec: \"nope\": executable file not found in $PATH"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
