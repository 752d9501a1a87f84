//! OCI hooks: each program run with the container's state JSON on its stdin, its own
//! args and env, and its timeout (runtime-spec config.md "POSIX-platform Hooks").

use oci_spec::runtime::Hook;
use std::os::fd::{AsRawFd, OwnedFd};

/// Run `hooks` in order; the first that fails (non-zero exit, signal, spawn error, or its
/// `timeout` passed: then it is killed) ends the run with one line naming `phase` (e.g.
/// "createRuntime"), the hook's path and why.
pub fn run(phase: &str, hooks: &[Hook], state_json: &str) -> super::Result<()> {
    for h in hooks {
        run_one(phase, h, state_json)?;
    }
    Ok(())
}

fn run_one(phase: &str, h: &Hook, state_json: &str) -> super::Result<()> {
    use std::io::Write;
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    let path = h.path();
    let name = || format!("{phase} hook {}", path.display());
    let failed = |why: String| super::Error::Hook(format!("{}: {why}", name()));
    let args = h.args().clone().unwrap_or_default();
    let mut cmd = Command::new(path);
    if let Some(a0) = args.first() {
        cmd.arg0(a0);
    }
    cmd.args(args.iter().skip(1));
    cmd.env_clear();
    for kv in h.env().iter().flatten() {
        if let Some((k, v)) = kv.split_once('=') {
            cmd.env(k, v);
        }
    }
    cmd.stdin(Stdio::piped());
    // Captured, as runc does, so that a failure says what the hook said.
    cmd.stdout(Stdio::piped());
    cmd.stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| failed(e.to_string()))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A hook that does not read its stdin is not an error (EPIPE).
        let _ = stdin.write_all(state_json.as_bytes());
    }
    let mut out = Captured::new(child.stdout.take().map(OwnedFd::from));
    let mut err = Captured::new(child.stderr.take().map(OwnedFd::from));
    let deadline = h
        .timeout()
        .filter(|&t| t > 0)
        .map(|t| std::time::Instant::now() + std::time::Duration::from_secs(t as u64));
    loop {
        match child.try_wait() {
            Ok(Some(st)) => {
                out.drain();
                err.drain();
                if st.success() {
                    return Ok(());
                }
                return Err(failed(format!(
                    "{}, stdout: {}, stderr: {}",
                    describe(st),
                    out.text(),
                    err.text()
                )));
            }
            Ok(None) => {}
            Err(e) => return Err(failed(format!("waiting: {e}"))),
        }
        if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(failed(format!(
                "timed out after {}s",
                h.timeout().unwrap_or(0)
            )));
        }
        // Read what is there (a hook that fills a pipe would wait for us), then a tick.
        let mut fds: Vec<libc::pollfd> = [&out, &err]
            .iter()
            .filter_map(|c| c.fd.as_ref())
            .map(|fd| libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // SAFETY: poll on a live array of pollfds.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 5) };
        out.read_some();
        err.read_some();
    }
}

/// A hook's stdout or stderr: what it wrote, up to a bound, read without blocking.
struct Captured {
    fd: Option<OwnedFd>,
    data: Vec<u8>,
}

impl Captured {
    const LIMIT: usize = 16 << 10;

    fn new(fd: Option<OwnedFd>) -> Captured {
        if let Some(fd) = &fd {
            let _ = nix::fcntl::fcntl(
                fd,
                nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
            );
        }
        Captured {
            fd,
            data: Vec::new(),
        }
    }

    /// Read what is ready; close the pipe at its end.
    fn read_some(&mut self) {
        let Some(fd) = &self.fd else { return };
        let mut buf = [0u8; 4096];
        loop {
            match nix::unistd::read(fd, &mut buf) {
                Ok(0) => {
                    self.fd = None;
                    return;
                }
                Ok(n) => {
                    let room = Self::LIMIT.saturating_sub(self.data.len());
                    self.data.extend_from_slice(&buf[..n.min(room)]);
                }
                Err(nix::errno::Errno::EINTR) => continue,
                Err(_) => return,
            }
        }
    }

    /// After the hook exited: what is left in the pipe (a child of the hook may hold it
    /// open: no waiting for its end).
    fn drain(&mut self) {
        self.read_some();
    }

    /// On one line, as the error is.
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.data)
            .trim()
            .replace('\n', " ")
    }
}

fn describe(st: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (st.code(), st.signal()) {
        (Some(c), _) => format!("exit status {c}"),
        (_, Some(s)) => format!("killed by {}", crate::sys::signals::signal_name(s)),
        _ => "failed".into(),
    }
}
