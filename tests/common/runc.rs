//! Driver of a runc command line for the runc front-end's tests: the runtime under test is a
//! parameter (`RUNC_UNDER_TEST`, by default the `podinit-runc` link beside the binary), so
//! every test can be proved right by running it with `RUNC_UNDER_TEST=/usr/sbin/runc`.
//! A `Lab` holds the scratch dir, both runtimes with private `--root`s, the bundles and
//! whatever the host got (cgroups, netns); its drop removes all of it, also on failure.

use super::{bin, find_dirs, kill_and_remove, unique, wait_within, OutputWithin, CLIENT_LIMIT};
use serde_json::{json, Value};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The oracle: Debian's runc.
pub const ORACLE: &str = "/usr/sbin/runc";

/// The runtime under test: `RUNC_UNDER_TEST`, or podinit through its `podinit-runc` link.
pub fn under_test() -> PathBuf {
    match std::env::var_os("RUNC_UNDER_TEST") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => podinit_runc_link(),
    }
}

/// Whether `r` runs the installed runc (the oracle, also when it is the runtime under test):
/// where runc 1.1 departs from the runtime spec and podinit does not, tests say so here.
pub fn is_installed_runc(r: &Runc) -> bool {
    let canon = |p: &Path| std::fs::canonicalize(p).ok();
    canon(&r.bin) == canon(Path::new(ORACLE))
}

/// `podinit-runc` beside the test build of `podinit`, made when missing: podinit speaks
/// runc's command line when its name ends in `runc`.
pub fn podinit_runc_link() -> PathBuf {
    let link = bin().with_file_name("podinit-runc");
    if std::fs::symlink_metadata(&link).is_err() {
        // Tests run in parallel: another may have made it in between.
        if let Err(e) = std::os::unix::fs::symlink(bin(), &link) {
            assert!(
                e.kind() == std::io::ErrorKind::AlreadyExists,
                "linking {}: {e}",
                link.display()
            );
        }
    }
    link
}

/// Installs Debian's `package` when `command` is missing; one installer at a time, and apt
/// waits for a lock another process holds.
pub fn ensure_tool(command: &str, package: &str) {
    static APT: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = APT.lock().unwrap_or_else(|e| e.into_inner());
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {command}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if found {
        return;
    }
    let ok = Command::new("apt-get")
        .args(["install", "-y", "--no-install-recommends"])
        .args(["-o", "DPkg::Lock::Timeout=300", package])
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdout(Stdio::null())
        .output_within(Duration::from_secs(600))
        .status
        .success();
    assert!(ok, "installing {package} (for {command})");
}

/// What one runtime command did.
#[derive(Debug, Clone)]
pub struct RuncOut {
    /// The exit code, or 128 + the signal that killed it (as a shell reports it).
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub what: String,
}

impl RuncOut {
    fn from_status(what: String, st: std::process::ExitStatus, out: &[u8], err: &[u8]) -> Self {
        use std::os::unix::process::ExitStatusExt;
        RuncOut {
            code: st.code().unwrap_or_else(|| 128 + st.signal().unwrap_or(0)),
            stdout: String::from_utf8_lossy(out).into_owned(),
            stderr: String::from_utf8_lossy(err).into_owned(),
            what,
        }
    }

    pub fn ok(&self) -> bool {
        self.code == 0
    }

    /// Panics (naming the command and its stderr) unless it succeeded.
    pub fn expect_ok(self) -> Self {
        assert!(
            self.ok(),
            "{} failed with {}: {}{}",
            self.what,
            self.code,
            self.stderr,
            self.stdout
        );
        self
    }

    /// Panics unless it failed.
    pub fn expect_fail(self) -> Self {
        assert!(
            !self.ok(),
            "{} succeeded but should fail: {}",
            self.what,
            self.stdout
        );
        self
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("{}: stdout is not JSON ({e}): {}", self.what, self.stdout))
    }
}

/// A command to its end (bounded), stdio piped.
pub fn output_of(mut c: Command) -> RuncOut {
    let what = format!("{c:?}");
    let o = c.output_within(CLIENT_LIMIT);
    RuncOut::from_status(what, o.status, &o.stdout, &o.stderr)
}

/// A unique name for what a test makes on the host (namespaces, dirs), found by clean-up.
pub fn unique_name(prefix: &str) -> String {
    unique(&format!("pit-{prefix}"))
}

/// One runtime with a private `--root`.
pub struct Runc {
    pub bin: PathBuf,
    pub root: PathBuf,
    /// Oracle or under test: shown in messages.
    pub label: &'static str,
    ids: Mutex<Vec<String>>,
}

impl Runc {
    pub fn new(bin: PathBuf, root: PathBuf, label: &'static str) -> Runc {
        Runc {
            bin,
            root,
            label,
            ids: Mutex::new(Vec::new()),
        }
    }

    /// `BIN --root ROOT`, for more arguments.
    pub fn cmd(&self) -> Command {
        let mut c = Command::new(&self.bin);
        c.arg("--root").arg(&self.root);
        c
    }

    /// Remember `id` so that the drop deletes it whatever happens.
    pub fn track(&self, id: &str) {
        let mut ids = self.ids.lock().unwrap_or_else(|e| e.into_inner());
        if !ids.iter().any(|i| i == id) {
            ids.push(id.to_string());
        }
    }

    /// One command to its end (bounded), stdio piped.
    pub fn run(&self, args: &[&str]) -> RuncOut {
        let mut c = self.cmd();
        c.args(args);
        self.output(c)
    }

    pub fn output(&self, mut c: Command) -> RuncOut {
        let what = format!("{} {:?}", self.label, c);
        let o = c.output_within(CLIENT_LIMIT);
        RuncOut::from_status(what, o.status, &o.stdout, &o.stderr)
    }

    /// A command whose container keeps the stdio it is given (`create`, `run -d`,
    /// `exec -d`): stdout and stderr go to files, else the pipes would stay open as long as
    /// the container runs. What is in them when the command ends is the runtime's own
    /// output; what comes after is the container's (`Bundle::container_output`).
    pub fn run_detached(&self, args: &[&str], out: &Path) -> RuncOut {
        let mut c = self.cmd();
        c.args(args);
        self.detached(c, out)
    }

    pub fn detached(&self, mut c: Command, out: &Path) -> RuncOut {
        let what = format!("{} {:?}", self.label, c);
        let (o, e) = (out.with_extension("out"), out.with_extension("err"));
        let mut child = c
            .stdin(Stdio::null())
            .stdout(File::create(&o).unwrap())
            .stderr(File::create(&e).unwrap())
            .spawn()
            .unwrap_or_else(|err| panic!("spawning {what}: {err}"));
        let st = wait_within(&mut child, CLIENT_LIMIT, &what);
        let read = |p: &Path| std::fs::read(p).unwrap_or_default();
        RuncOut::from_status(what, st, &read(&o), &read(&e))
    }

    /// `create --bundle B ID` with the container's stdio in files of the bundle.
    pub fn create(&self, b: &Bundle, id: &str, extra: &[&str]) -> RuncOut {
        self.track(id);
        let mut args = vec!["create", "--bundle", b.path()];
        args.extend_from_slice(extra);
        args.push(id);
        self.run_detached(&args, &b.dir.join("stdio"))
    }

    /// `run --bundle B ID` in the foreground: its exit status is the container's.
    pub fn run_fg(&self, b: &Bundle, id: &str) -> RuncOut {
        self.track(id);
        self.run(&["run", "--bundle", b.path(), id])
    }

    /// `run -d --bundle B ID`.
    pub fn run_bg(&self, b: &Bundle, id: &str) -> RuncOut {
        self.track(id);
        self.run_detached(
            &["run", "-d", "--bundle", b.path(), id],
            &b.dir.join("stdio"),
        )
    }

    /// The state JSON, or None when the runtime does not know the container.
    pub fn state(&self, id: &str) -> Option<Value> {
        let o = self.run(&["state", id]);
        o.ok().then(|| o.json())
    }

    /// Poll `state` until its status is `want` (bounded).
    pub fn wait_status(&self, id: &str, want: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let s = self.state(id);
            if let Some(s) = &s {
                if s["status"] == want {
                    return s.clone();
                }
            }
            assert!(
                Instant::now() < deadline,
                "{}: {id} never became {want}; last state: {s:?}",
                self.label
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Delete every container this runtime made, then its root.
    fn clean(&self) {
        let mut ids = self.ids.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Ok(rd) = std::fs::read_dir(&self.root) {
            for e in rd.flatten() {
                let n = e.file_name().to_string_lossy().into_owned();
                if !ids.contains(&n) {
                    ids.push(n);
                }
            }
        }
        for id in ids {
            let mut c = self.cmd();
            c.args(["delete", "--force", &id])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            if let Ok(mut child) = c.spawn() {
                let deadline = Instant::now() + Duration::from_secs(20);
                while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(10));
                }
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// An OCI bundle: a copy of the busybox rootfs and the config `runc spec` writes, adjusted.
pub struct Bundle {
    pub dir: PathBuf,
    pub config: Value,
    /// Unique: the last part of `linux.cgroupsPath`, looked for at clean-up.
    pub cgroup: String,
    path: String,
}

impl Bundle {
    pub fn path(&self) -> &str {
        &self.path
    }

    pub fn rootfs(&self) -> PathBuf {
        self.dir.join("rootfs")
    }

    /// Write `config` to `config.json`: after any change to it.
    pub fn write(&self) {
        std::fs::write(
            self.dir.join("config.json"),
            serde_json::to_vec_pretty(&self.config).unwrap(),
        )
        .unwrap();
    }

    /// Set the value at a JSON pointer, making the objects on the way, then write.
    pub fn set(&mut self, pointer: &str, v: Value) {
        let mut cur = &mut self.config;
        for key in pointer.trim_start_matches('/').split('/') {
            if !cur.is_object() {
                *cur = json!({});
            }
            cur = cur
                .as_object_mut()
                .unwrap()
                .entry(key.to_string())
                .or_insert(Value::Null);
        }
        *cur = v;
        self.write();
    }

    /// The container's stdout written after the `create`/`run -d`/`exec -d` that started it.
    pub fn container_output(&self) -> String {
        std::fs::read_to_string(self.dir.join("stdio.out")).unwrap_or_default()
    }
}

/// The scratch of one test: both runtimes, bundles, host objects. Dropped last.
pub struct Lab {
    pub dir: PathBuf,
    pub name: String,
    runtimes: [Runc; 2],
    cgroups: Mutex<Vec<String>>,
    netns: Mutex<Vec<String>>,
}

impl Lab {
    pub fn new(prefix: &str) -> Lab {
        Lab::with_runtime(prefix, |_| under_test())
    }

    /// A lab whose runtime under test is what `make` returns, given the lab's scratch dir
    /// (a copy of the binary that a test may let a container attack).
    pub fn with_runtime(prefix: &str, make: impl FnOnce(&Path) -> PathBuf) -> Lab {
        let name = unique(prefix);
        let dir = std::env::temp_dir().join(format!("podinit-it-{name}"));
        std::fs::create_dir_all(&dir).unwrap();
        // Traversable by the mapped root of a user namespace.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let tested = make(&dir);
        assert!(
            tested.exists(),
            "the runtime under test {} does not exist",
            tested.display()
        );
        let runtimes = [
            Runc::new(ORACLE.into(), dir.join("root-runc"), "runc"),
            Runc::new(tested, dir.join("root-tested"), "under test"),
        ];
        Lab {
            dir,
            name,
            runtimes,
            cgroups: Mutex::new(Vec::new()),
            netns: Mutex::new(Vec::new()),
        }
    }

    pub fn oracle(&self) -> &Runc {
        &self.runtimes[0]
    }

    pub fn tested(&self) -> &Runc {
        &self.runtimes[1]
    }

    /// The oracle first, then the runtime under test.
    pub fn both(&self) -> [&Runc; 2] {
        [&self.runtimes[0], &self.runtimes[1]]
    }

    /// A unique name (container IDs, cgroups, netns) that clean-up also looks for.
    pub fn id(&self, what: &str) -> String {
        unique(&format!("pit-{what}"))
    }

    /// A bundle running `args` (no terminal) in a cgroup of its own.
    pub fn bundle(&self, args: &[&str]) -> Bundle {
        let cgroup = self.id("cg");
        let dir = self.dir.join(format!("bundle-{cgroup}"));
        std::fs::create_dir_all(&dir).unwrap();
        self.cgroups
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(cgroup.clone());
        let ok = Command::new("cp")
            .arg("-a")
            .arg(super::bundles().join("busybox/rootfs"))
            .arg(dir.join("rootfs"))
            .status()
            .unwrap()
            .success();
        assert!(ok, "copying the busybox rootfs");
        // The oracle's template for both: the same starting point whatever the tested
        // runtime's own `spec` writes.
        Command::new(ORACLE)
            .args(["spec", "--bundle"])
            .arg(&dir)
            .output_within(CLIENT_LIMIT);
        self.adopt(dir, cgroup, args)
    }

    /// A bundle made elsewhere (`umoci unpack`), given `args`, no terminal, a cgroup of
    /// its own and the mark of its processes.
    pub fn bundle_from(&self, dir: PathBuf, args: &[&str]) -> Bundle {
        let cgroup = self.id("cg");
        self.cgroups
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(cgroup.clone());
        self.adopt(dir, cgroup, args)
    }

    fn adopt(&self, dir: PathBuf, cgroup: String, args: &[&str]) -> Bundle {
        let path = dir.join("config.json");
        let mut config: Value = serde_json::from_slice(&std::fs::read(&path).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        config["process"]["terminal"] = json!(false);
        config["process"]["args"] = json!(args);
        config["linux"]["cgroupsPath"] = json!(format!("/{cgroup}"));
        // Marks the container's processes (and what they start) for `processes_marked`.
        if !config["process"]["env"].is_array() {
            config["process"]["env"] = json!([]);
        }
        config["process"]["env"]
            .as_array_mut()
            .unwrap()
            .push(json!(format!("{MARK}={cgroup}")));
        let b = Bundle {
            path: dir.to_string_lossy().into_owned(),
            dir,
            config,
            cgroup,
        };
        b.write();
        b
    }

    /// A network namespace made with `ip netns add` (or, where `ip` has no netns, as in
    /// the pure-v2 VM's busybox, bound to the same path by `unshare --net=PATH`), removed
    /// at the end; its path.
    pub fn netns(&self) -> PathBuf {
        let name = self.id("ns");
        let path = PathBuf::from("/run/netns").join(&name);
        let mut ok = Command::new("ip")
            .args(["netns", "add", &name])
            .output_within(CLIENT_LIMIT)
            .status
            .success();
        if !ok {
            let _ = std::fs::create_dir_all("/run/netns");
            ok = std::fs::write(&path, "").is_ok()
                && Command::new("unshare")
                    .arg(format!("--net={}", path.display()))
                    .arg("true")
                    .output_within(CLIENT_LIMIT)
                    .status
                    .success();
        }
        assert!(
            ok,
            "ip netns add {name} (or unshare --net={})",
            path.display()
        );
        self.netns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(name.clone());
        PathBuf::from("/run/netns").join(name)
    }

    /// Nothing of container `id` of bundle `b` is left on the host: no cgroup, no mount
    /// below the bundle, no process with its mark, and (unless `state_allowed`) no state.
    pub fn assert_nothing_left(&self, r: &Runc, b: &Bundle, id: &str, state_allowed: bool) {
        let cgs = find_dirs(Path::new("/sys/fs/cgroup"), &b.cgroup, 6);
        assert!(cgs.is_empty(), "{}: cgroups left behind: {cgs:?}", r.label);
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        let left: Vec<&str> = mounts.lines().filter(|l| l.contains(b.path())).collect();
        assert!(left.is_empty(), "{}: mounts left: {left:#?}", r.label);
        let procs = processes_marked(&b.cgroup);
        assert!(
            procs.is_empty(),
            "{}: processes left in {}: {procs:?}",
            r.label,
            b.path()
        );
        if !state_allowed {
            let st = r.root.join(id);
            assert!(
                !st.exists(),
                "{}: state dir {} left behind",
                r.label,
                st.display()
            );
            let state = r.run(&["state", id]);
            assert!(
                !state.ok(),
                "{}: state of {id} still known: {}",
                r.label,
                state.stdout
            );
        }
    }
}

/// The variable of a bundle's process environment that names its cgroup.
pub const MARK: &str = "PIT_MARK";

/// Pids started with `MARK=mark` in their environment: a bundle's processes, found
/// whichever namespaces and cgroup they ended in.
pub fn processes_marked(mark: &str) -> Vec<i32> {
    let needle = format!("{MARK}={mark}");
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let env = std::fs::read(e.path().join("environ")).unwrap_or_default();
        if env.split(|b| *b == 0).any(|v| v == needle.as_bytes()) {
            out.push(pid);
        }
    }
    out
}

impl Drop for Lab {
    fn drop(&mut self) {
        for r in &self.runtimes {
            r.clean();
        }
        for cg in self
            .cgroups
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            for d in find_dirs(Path::new("/sys/fs/cgroup"), cg, 6) {
                kill_and_remove(&d);
            }
            // Any that ended outside their cgroup.
            for pid in processes_marked(cg) {
                // SAFETY: a process started with this test's bundle's mark.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        for ns in self.netns.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            let _ = Command::new("ip")
                .args(["netns", "del", ns])
                .stderr(Stdio::null())
                .status();
            // The unshare-made kind (or what `ip` left): unbound and removed.
            let path = PathBuf::from("/run/netns").join(ns);
            if path.exists() {
                let _ = nix::mount::umount2(&path, nix::mount::MntFlags::MNT_DETACH);
                let _ = std::fs::remove_file(&path);
            }
        }
        unmount_below(&self.dir);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Lazily unmount everything mounted at or below `dir`, deepest first.
pub fn unmount_below(dir: &Path) {
    let prefix = dir.to_string_lossy().into_owned();
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut points: Vec<&str> = mounts
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|p| p.starts_with(&prefix))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.len()));
    for p in points {
        let _ = Command::new("umount")
            .args(["-l", p])
            .stderr(Stdio::null())
            .status();
    }
}

/// Wait (bounded) until `f` returns Some.
pub fn wait_for<T>(limit: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The line of `/proc/PID/status` that starts with `key:`, its value trimmed.
pub fn proc_status(pid: i64, key: &str) -> Option<String> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .map(|v| v.trim().to_string())
}

/// The busybox OCI archive of `scripts/make-oci-image` at `out`, named `reference`.
pub fn make_oci_image(out: &Path, reference: &str) {
    let o = Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/make-oci-image"))
        .arg(out)
        .arg(reference)
        .output_within(CLIENT_LIMIT);
    assert!(
        o.status.success(),
        "make-oci-image: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}
