//! OCI hooks: each program run with the container's state JSON on its stdin, its own
//! args and env, and its timeout (runtime-spec config.md "POSIX-platform Hooks").

use oci_spec::runtime::Hook;

/// Run `hooks` in order; the first that fails (non-zero exit, signal, spawn error, or its
/// `timeout` passed: then it is killed) ends the run with one line naming `phase` (e.g.
/// "createRuntime"), the hook's path and why.
pub fn run(phase: &str, hooks: &[Hook], state_json: &str) -> Result<(), String> {
    for h in hooks {
        run_one(phase, h, state_json)?;
    }
    Ok(())
}

fn run_one(phase: &str, h: &Hook, state_json: &str) -> Result<(), String> {
    use std::io::Write;
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    let path = h.path();
    let name = || format!("{phase} hook {}", path.display());
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
    let mut child = cmd.spawn().map_err(|e| format!("{}: {e}", name()))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A hook that does not read its stdin is not an error (EPIPE).
        let _ = stdin.write_all(state_json.as_bytes());
    }
    let deadline = h
        .timeout()
        .filter(|&t| t > 0)
        .map(|t| std::time::Instant::now() + std::time::Duration::from_secs(t as u64));
    loop {
        match child.try_wait() {
            Ok(Some(st)) if st.success() => return Ok(()),
            Ok(Some(st)) => return Err(format!("{}: {}", name(), describe(st))),
            Ok(None) => {}
            Err(e) => return Err(format!("{}: waiting: {e}", name())),
        }
        if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "{}: timed out after {}s",
                name(),
                h.timeout().unwrap_or(0)
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
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
