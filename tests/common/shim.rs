//! What the tests that drive containerd-shim-podinit-v1 without containerd share
//! (tests/shim_task.rs, shim_sandbox.rs, escapes_shim.rs): the shim's `start` as containerd
//! runs it, the FIFOs containerd makes, and the cgroup hierarchies a lab cleans. Included
//! by those tests alone (`#[path]`): it needs the shim feature's crates.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use containerd_shim::protos::ttrpc::context;

pub const SHIM: &str = env!("CARGO_BIN_EXE_containerd-shim-podinit-v1");

/// Every hierarchy a cgroup of the lab may be in (the one on pure v2).
pub fn cgroup_hierarchies() -> Vec<PathBuf> {
    let base = Path::new("/sys/fs/cgroup");
    if base.join("cgroup.controllers").exists() {
        return vec![base.to_path_buf()];
    }
    std::fs::read_dir(base)
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_dir() && !p.is_symlink())
                .collect()
        })
        .unwrap_or_default()
}

/// A ttrpc call's context, with containerd's kind of deadline.
pub fn ctx() -> context::Context {
    context::with_timeout(Duration::from_secs(30).as_nanos() as i64)
}

/// The shim's `start`, run as containerd runs it: in the bundle, with TTRPC_ADDRESS at the
/// lab's events socket; the address it answers.
pub fn shim_start(ns: &str, lab_dir: &Path, bundle: &Path, id: &str) -> String {
    let out = Command::new(SHIM)
        .args(["-namespace", ns, "-id", id, "-address"])
        .arg(lab_dir.join("containerd.sock"))
        .args(["-publish-binary", "/bin/true", "start"])
        .current_dir(bundle)
        .env("TTRPC_ADDRESS", lab_dir.join("events.sock"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "shim start: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A FIFO at `path`, as containerd makes one, and its read end (non-blocking).
pub fn make_fifo(path: &Path) -> std::fs::File {
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .unwrap()
}

/// A FIFO `name` in `dir` for a process's stdio: its path and read end.
pub fn fifo(dir: &Path, name: &str) -> (String, std::fs::File) {
    let p = dir.join(name);
    let r = make_fifo(&p);
    (p.display().to_string(), r)
}

/// Everything in the FIFO until every writer is gone.
pub fn drain(mut f: std::fs::File) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match f.read(&mut buf) {
            Ok(0) if !out.is_empty() => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("reading a FIFO: {e}"),
        }
        assert!(Instant::now() < deadline, "FIFO never closed: {out:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    String::from_utf8_lossy(&out).into_owned()
}
