//! The CRI lab: a private containerd 1.6 with its CRI plugin, per test, everything under a
//! temp dir of its own: config, root, state (network namespaces too), sockets, the runc
//! handler's state, a CNI bridge network of its own name and subnet, the images. As on a
//! node, containerd's state (the runtimes' state with it: runc's `Root` is below it, as
//! `/run/containerd/runc` is) is on a tmpfs of the lab's own, and its root on disk. Two
//! handlers: `runc` (containerd-shim-runc-v2) and `podinit` (containerd-shim-podinit-v1,
//! the cargo-built shim, found on containerd's PATH).
//!
//! Drop removes every pod through the CRI, then stops containerd and removes whatever a
//! failed test left: processes, mounts, cgroups, the bridge, the CNI cache, the temp dir.
//! A shim still running once its pods are gone is a defect of the runtime: the drop
//! reports it (and fails the test when it has not failed already).
//!
//! A test run that is killed runs no drop: its lab stays, containerd and pods running.
//! Each lab records its owner (the test process, by pid and start time) in its dir, and a
//! lab that starts sweeps every lab whose owner is dead ([`sweep_dead_labs`]); a lab whose
//! owner lives is never touched, however old.
//!
//! Used by the test files as `#[path = "common/cri.rs"] mod cri;` beside `mod common;`
//! and `#[path = "common/cri_client.rs"] mod cri_client;` (benches/cri.rs too). Set
//! `PODINIT_CRI_KEEP=1` to keep the lab's dir (config, containerd.log, pod logs) after a
//! run, and `PODINIT_CRI_SHIM=PATH` to run the podinit handler on another shim build.

#![allow(dead_code)]

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{kill_and_remove, OutputWithin, CLIENT_LIMIT};
use crate::cri_client::{api, Client};

pub const PAUSE_IMAGE: &str = "podinit.test/pause:1";
pub const BUSYBOX: &str = "podinit.test/busybox:1";
pub const HANDLERS: [&str; 2] = ["runc", "podinit"];
/// The podinit handler in containerd 2's Sandbox mode (`sandbox_mode = "shim"`, which
/// containerd 2 migrates to `sandboxer = "shim"`): declared on containerd 2 only.
pub const SANDBOX_HANDLER: &str = "podinit-sandbox";

/// How long containerd may take to come up (or to stop).
const DAEMON_LIMIT: Duration = Duration::from_secs(30);

/// Which containerd a lab runs: Debian's 1.6, or 2.x from the shared test tools
/// (`shared/containerd-2/bin` in a directory above this crate, or `PODINIT_CONTAINERD2`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Containerd {
    V1_6,
    V2(PathBuf),
}

impl Containerd {
    /// containerd 2's `bin/` directory, when the test tools are on this machine.
    pub fn v2() -> Option<Containerd> {
        let from_env = std::env::var_os("PODINIT_CONTAINERD2").map(PathBuf::from);
        let found = from_env.or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .ancestors()
                .map(|d| d.join("shared/containerd-2/bin"))
                .find(|b| b.join("containerd").is_file())
        })?;
        found
            .join("containerd")
            .is_file()
            .then_some(Containerd::V2(found))
    }

    /// The containerd `PODINIT_CRI_CONTAINERD` names (`1.6`, the default, or `2`), so that
    /// every CRI test runs on either; `2` without the tools is an error, not a silent 1.6.
    pub fn from_env() -> Containerd {
        match std::env::var("PODINIT_CRI_CONTAINERD").as_deref() {
            Err(_) | Ok("") | Ok("1.6") => Containerd::V1_6,
            Ok("2") => Containerd::v2().expect(
                "PODINIT_CRI_CONTAINERD=2, but no shared/containerd-2/bin/containerd above the \
                 crate and no PODINIT_CONTAINERD2",
            ),
            Ok(other) => panic!("PODINIT_CRI_CONTAINERD={other}: 1.6 or 2"),
        }
    }

    pub fn label(&self) -> &'static str {
        match self {
            Containerd::V1_6 => "containerd 1.6",
            Containerd::V2(_) => "containerd 2",
        }
    }

    /// A program of this containerd's release (`containerd`, `ctr`).
    pub fn program(&self, name: &str) -> PathBuf {
        match self {
            Containerd::V1_6 => PathBuf::from(name),
            Containerd::V2(bin) => bin.join(name),
        }
    }
}

pub struct Lab {
    pub name: String,
    pub dir: PathBuf,
    pub sock: PathBuf,
    /// The CNI network's bridge and its subnet's first three octets.
    pub bridge: String,
    pub net_prefix: String,
    pub daemon: Containerd,
    /// Where podinit's shims put their sockets: the state's `s` on containerd 1.6, the
    /// `socket_dir` given to containerd 2 (which allows 42 characters: not under the lab).
    pub socket_dir: PathBuf,
    /// `127.0.0.1:PORT` of a registry that mirrors every registry the pods name.
    mirror: Option<String>,
    containerd: Option<Child>,
    client: Option<Client>,
    /// Cleaned up already (a dead lab swept, or one handed to a test as abandoned): the
    /// drop does nothing more.
    cleaned: bool,
    /// Both handlers with `SystemdCgroup = true` and the pods' cgroup parents slices, as
    /// on a node whose kubelet runs the systemd cgroup driver (systemd must be PID 1).
    pub systemd: bool,
    /// More variables in containerd's environment, which its shims inherit: set before a
    /// `start`.
    pub env: Vec<(String, String)>,
}

fn random_u32() -> u32 {
    let mut b = [0u8; 4];
    std::fs::File::open("/dev/urandom")
        .unwrap()
        .read_exact(&mut b)
        .unwrap();
    u32::from_le_bytes(b)
}

/// A unique id for a pod or container name.
pub fn unique(prefix: &str) -> String {
    format!("{prefix}-{:08x}", random_u32())
}

/// Install the Debian packages the lab runs when they are missing.
fn install_missing() {
    let mut need = Vec::new();
    for (cmd, pkg) in [
        ("/usr/bin/containerd", "containerd"),
        ("/usr/sbin/runc", "runc"),
        ("/usr/lib/cni/bridge", "containernetworking-plugins"),
        ("/usr/sbin/iptables", "iptables"),
        ("/bin/busybox", "busybox-static"),
    ] {
        if !Path::new(cmd).exists() {
            need.push(pkg);
        }
    }
    if need.is_empty() {
        return;
    }
    let ok = Command::new("apt-get")
        .args(["install", "-y", "--no-install-recommends"])
        .args(&need)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdout(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(ok, "apt-get install {need:?} failed");
}

impl Lab {
    /// A lab with containerd running, ready (runtime and network), and the images
    /// imported.
    pub fn new(prefix: &str) -> Lab {
        Lab::with(prefix, Containerd::from_env(), None)
    }

    /// A lab for `handler`: [`Lab::new`]'s, but containerd 2 for the Sandbox mode's
    /// handler, which containerd 1.6 does not have (failing with one line saying so where
    /// the shared test tools are missing).
    pub fn for_handler(prefix: &str, handler: &str) -> Lab {
        if handler != SANDBOX_HANDLER {
            return Lab::new(prefix);
        }
        let v2 = Containerd::v2().expect(
            "the Sandbox mode needs containerd 2: no shared/containerd-2/bin/containerd above \
             the crate and no PODINIT_CONTAINERD2",
        );
        Lab::with(prefix, v2, None)
    }

    /// A lab on `daemon`, pulling every registry's images from `mirror` when given.
    pub fn with(prefix: &str, daemon: Containerd, mirror: Option<String>) -> Lab {
        Lab::make(prefix, daemon, mirror, false)
    }

    /// A lab on `daemon` with the systemd cgroup driver (`systemd`).
    pub fn with_systemd(prefix: &str, daemon: Containerd) -> Lab {
        Lab::make(prefix, daemon, None, true)
    }

    fn make(prefix: &str, daemon: Containerd, mirror: Option<String>, systemd: bool) -> Lab {
        install_missing();
        for (dir, problems) in sweep_dead_labs() {
            eprintln!(
                "CRI lab: swept {}, left by a test run that died{}",
                dir.display(),
                if problems.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", problems.join("; "))
                }
            );
        }
        let n = random_u32();
        let name = format!("{prefix}-{n:08x}");
        let dir = std::env::temp_dir().join(format!("{LAB_DIR_PREFIX}{name}"));
        std::fs::create_dir_all(&dir).unwrap();
        // A subnet of 10.128.0.0/9 per lab: two labs at once differ but by chance.
        let net_prefix = format!("10.{}.{}", 128 + (n >> 8) % 128, n % 256);
        let socket_dir = match daemon {
            Containerd::V1_6 => dir.join("state/s"),
            Containerd::V2(_) => PathBuf::from(format!("/tmp/pcri-s-{n:08x}")),
        };
        let mut lab = Lab {
            sock: dir.join("c.sock"),
            bridge: format!("pcri{:08x}", n),
            net_prefix,
            name,
            dir,
            socket_dir,
            daemon,
            mirror,
            containerd: None,
            client: None,
            cleaned: false,
            systemd,
            env: Vec::new(),
        };
        lab.write_owner(&crate::common::process_identity(std::process::id() as i32));
        lab.mount_state();
        lab.write_config();
        lab.make_bridge();
        lab.make_images();
        lab.start();
        lab.import_images();
        lab
    }

    pub fn cri(&self) -> &Client {
        self.client.as_ref().expect("containerd is running")
    }

    /// containerd's pid (to trace it, say).
    #[allow(dead_code)]
    pub fn containerd_pid(&self) -> u32 {
        self.containerd
            .as_ref()
            .expect("containerd is running")
            .id()
    }

    fn write_config(&self) {
        let d = &self.dir;
        for sub in ["bin", "cni", "logs", "images"] {
            std::fs::create_dir_all(d.join(sub)).unwrap();
        }
        // PODINIT_CRI_SHIM runs another build of the shim (a release one, say).
        let shim = std::env::var_os("PODINIT_CRI_SHIM")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_containerd-shim-podinit-v1")));
        std::os::unix::fs::symlink(&shim, d.join("bin/containerd-shim-podinit-v1")).unwrap();
        let p = |s: &str| d.join(s).display().to_string();
        // Under the systemd driver podinit's handler is declared as runc's type with the
        // shim as its path, so that containerd hands it runc's options (docs/cri.md §7).
        let (podinit_runtime, runc_systemd) = if self.systemd {
            (
                format!(
                    "      runtime_type = \"io.containerd.runc.v2\"\n      runtime_path = \"{}\"\n      [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.podinit.options]\n        SystemdCgroup = true\n",
                    d.join("bin/containerd-shim-podinit-v1").display()
                ),
                "        SystemdCgroup = true\n",
            )
        } else {
            (
                "      runtime_type = \"io.containerd.podinit.v1\"\n".to_string(),
                "",
            )
        };
        let config = format!(
            r#"version = 2
root = "{root}"
state = "{state}"
[grpc]
  address = "{sock}"
[ttrpc]
  address = "{sock}.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "{opt}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  restrict_oom_score_adj = true
  disable_apparmor = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    snapshotter = "overlayfs"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      pod_annotations = ["*", "*/*"]
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "/usr/sbin/runc"
        Root = "{runc}"
{runc_systemd}    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.podinit]
      pod_annotations = ["*", "*/*"]
{podinit_runtime}{sandbox_handler}  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{cni}"
    max_conf_num = 1
{socket_dir}"#,
            root = p("root"),
            state = p("state"),
            sock = self.sock.display(),
            opt = p("opt"),
            runc = p("state/runc"),
            cni = p("cni"),
            sandbox_handler = match self.daemon {
                Containerd::V1_6 => String::new(),
                // Under the systemd driver, podinit's type with the option in its section:
                // containerd starts a sandboxer shim by the type alone (no runtime_path),
                // and hands it the section as runtimeoptions' TOML (docs/cri.md §7).
                Containerd::V2(_) if self.systemd => format!(
                    "    [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.{SANDBOX_HANDLER}]\n      runtime_type = \"io.containerd.podinit.v1\"\n      sandbox_mode = \"shim\"\n      pod_annotations = [\"*\", \"*/*\"]\n      [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.{SANDBOX_HANDLER}.options]\n        SystemdCgroup = true\n"
                ),
                Containerd::V2(_) => format!(
                    "    [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.{SANDBOX_HANDLER}]\n      runtime_type = \"io.containerd.podinit.v1\"\n      sandbox_mode = \"shim\"\n      pod_annotations = [\"*\", \"*/*\"]\n"
                ),
            },
            // containerd 2 names the shims' socket directory; a private one keeps its own.
            // So does its NRI socket, whose default (/var/run/nri/nri.sock) two labs at
            // once would both bind.
            socket_dir = match self.daemon {
                Containerd::V1_6 => String::new(),
                Containerd::V2(_) => format!(
                    "[plugins.\"io.containerd.shim.v1.manager\"]\n  socket_dir = \"{}\"\n[plugins.\"io.containerd.nri.v1.nri\"]\n  socket_path = \"{}\"\n",
                    self.socket_dir.display(),
                    self.dir.join("nri.sock").display()
                ),
            },
        );
        let mut config = config;
        if let Some(m) = &self.mirror {
            // Every registry the pods name is served by the mirror (hosts.toml's fallback
            // server stays the real one, never reached).
            let certs = d.join("certs.d");
            for registry in [
                "docker.io",
                "registry.k8s.io",
                "k8s.gcr.io",
                "gcr.io",
                "quay.io",
            ] {
                let h = certs.join(registry);
                std::fs::create_dir_all(&h).unwrap();
                std::fs::write(
                    h.join("hosts.toml"),
                    format!(
                        "server = \"https://{registry}\"\n[host.\"http://{m}\"]\n  \
                         capabilities = [\"pull\", \"resolve\"]\n"
                    ),
                )
                .unwrap();
            }
            config.push_str(&format!(
                "[plugins.\"io.containerd.grpc.v1.cri\".registry]\n  config_path = \"{}\"\n",
                certs.display()
            ));
        }
        std::fs::write(d.join("config.toml"), config).unwrap();
        // The bridge is the lab's, made with its gateway address before containerd starts:
        // the plugin then neither turns the host's forwarding on (isGateway would) nor
        // adds masquerading rules (ipMasq off). The pods reach the host only, and
        // host-local leaves the gateway's address out of its leases. Host ports are mapped
        // by portmap, as containerd's own example network does: its rules are the pod's
        // and go with it.
        let net = serde_json::json!({
            "cniVersion": "0.4.0",
            "name": format!("podinit-{}", self.name),
            "plugins": [{
                "type": "bridge",
                "bridge": self.bridge,
                "isGateway": false,
                "ipMasq": false,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": format!("{}.0/24", self.net_prefix)}]],
                    "dataDir": p("ipam"),
                },
            }, {
                "type": "portmap",
                "capabilities": {"portMappings": true},
            }],
        });
        std::fs::write(d.join("cni/10-podinit-test.conflist"), net.to_string()).unwrap();
    }

    fn make_bridge(&self) {
        let gw = format!("{}.1/24", self.net_prefix);
        for args in [
            vec!["link", "add", "name", &self.bridge, "type", "bridge"],
            vec!["addr", "add", &gw, "dev", &self.bridge],
            vec!["link", "set", &self.bridge, "up"],
        ] {
            let out = Command::new("ip").args(&args).output_within(CLIENT_LIMIT);
            assert!(
                out.status.success(),
                "ip {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }

    fn make_images(&self) {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/make-cri-images");
        let out = Command::new(script)
            .arg(self.dir.join("images"))
            .output_within(CLIENT_LIMIT);
        assert!(
            out.status.success(),
            "scripts/make-cri-images: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Start containerd (again) and wait until its CRI says runtime and network ready.
    pub fn start(&mut self) {
        assert!(self.containerd.is_none(), "containerd is already running");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("containerd.log"))
            .unwrap();
        // The lab's shim first, then the release's own (containerd 2's runc shim).
        let mut path = format!("{}:", self.dir.join("bin").display());
        if let Containerd::V2(bin) = &self.daemon {
            path.push_str(&format!("{}:", bin.display()));
        }
        path.push_str(&std::env::var("PATH").unwrap_or_default());
        let child = Command::new(self.daemon.program("containerd"))
            .arg("--config")
            .arg(self.dir.join("config.toml"))
            .env("PATH", path)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("spawn containerd");
        self.containerd = Some(child);
        let deadline = Instant::now() + DAEMON_LIMIT;
        let mut why = String::new();
        loop {
            if let Some(st) = self.containerd.as_mut().unwrap().try_wait().unwrap() {
                panic!("containerd exited ({st}): {}", self.log_tail());
            }
            if self.sock.exists() {
                match Client::connect(&self.sock, Duration::from_secs(5)) {
                    Ok(c) => match c.ready() {
                        Ok((true, true)) => {
                            self.client = Some(c);
                            return;
                        }
                        Ok(r) => why = format!("runtime, network ready: {r:?}"),
                        Err(e) => why = e.to_string(),
                    },
                    Err(e) => why = e,
                }
            }
            assert!(
                Instant::now() < deadline,
                "containerd not ready within {DAEMON_LIMIT:?} ({why}): {}",
                self.log_tail()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stop containerd (SIGTERM, then SIGKILL past the limit): what it runs stays.
    pub fn stop(&mut self) {
        self.client = None;
        if let Some(mut c) = self.containerd.take() {
            // SAFETY: our own child, not yet reaped.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            let deadline = Instant::now() + DAEMON_LIMIT;
            while c.try_wait().unwrap().is_none() {
                if Instant::now() > deadline {
                    let _ = c.kill();
                    let _ = c.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    pub fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.join("containerd.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    pub fn ctr(&self) -> Command {
        let mut c = Command::new(self.daemon.program("ctr"));
        c.arg("-a").arg(&self.sock).args(["-n", "k8s.io"]);
        c
    }

    fn import_images(&self) {
        for file in ["pause.tar", "busybox.tar"] {
            let out = self
                .ctr()
                .args(["images", "import"])
                .arg(self.dir.join("images").join(file))
                .output_within(CLIENT_LIMIT);
            assert!(
                out.status.success(),
                "ctr images import {file}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        // The CRI sees images through containerd's events: wait until it lists both.
        let deadline = Instant::now() + DAEMON_LIMIT;
        loop {
            let have = self.cri().images();
            if [PAUSE_IMAGE, BUSYBOX]
                .iter()
                .all(|i| have.iter().any(|h| h.ends_with(i)))
            {
                return;
            }
            assert!(Instant::now() < deadline, "the CRI lists {have:?} only");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The cgroup under which this lab's pods go (the kubelet's `kubepods` level).
    pub fn cgroup_root(&self) -> String {
        format!("/kubepods/{}", self.name)
    }

    /// The cgroup parent kubelet gives the pod of `uid`: a slice of its own under the
    /// systemd driver (`kubepods-besteffort-pod<uid>.slice`, `-` escaped as `_`), else a
    /// directory below the lab's.
    pub fn pod_cgroup_parent(&self, uid: &str) -> String {
        if self.systemd {
            format!("kubepods-besteffort-pod{}.slice", uid.replace('-', "_"))
        } else {
            format!("{}/pod{uid}", self.cgroup_root())
        }
    }

    /// A pod's config: its own name, uid, log directory and cgroup parent; CNI's network
    /// unless `host_network`; the pod-wide pid namespace when `share_pid`.
    pub fn pod_config(
        &self,
        name: &str,
        host_network: bool,
        share_pid: bool,
    ) -> api::PodSandboxConfig {
        let uid = format!("{:08x}-{:08x}", random_u32(), random_u32());
        let log_dir = self.dir.join("logs").join(&uid);
        std::fs::create_dir_all(&log_dir).unwrap();
        let mode = |m: api::NamespaceMode| m as i32;
        api::PodSandboxConfig {
            metadata: Some(api::PodSandboxMetadata {
                name: name.to_string(),
                uid: uid.clone(),
                namespace: "default".into(),
                attempt: 0,
            }),
            hostname: if host_network {
                String::new()
            } else {
                name.to_string()
            },
            log_directory: log_dir.display().to_string(),
            labels: [("app".to_string(), name.to_string())].into(),
            annotations: [("podinit.test/lab".to_string(), self.name.clone())].into(),
            linux: Some(api::LinuxPodSandboxConfig {
                cgroup_parent: self.pod_cgroup_parent(&uid),
                security_context: Some(api::LinuxSandboxSecurityContext {
                    namespace_options: Some(api::NamespaceOption {
                        network: mode(if host_network {
                            api::NamespaceMode::Node
                        } else {
                            api::NamespaceMode::Pod
                        }),
                        pid: mode(if share_pid {
                            api::NamespaceMode::Pod
                        } else {
                            api::NamespaceMode::Container
                        }),
                        ipc: mode(api::NamespaceMode::Pod),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// A busybox container running `args`, logging to `NAME.log` in the pod's log dir.
    pub fn container_config(&self, name: &str, args: &[&str]) -> api::ContainerConfig {
        api::ContainerConfig {
            metadata: Some(api::ContainerMetadata {
                name: name.to_string(),
                attempt: 0,
            }),
            image: Some(api::ImageSpec {
                image: BUSYBOX.to_string(),
                ..Default::default()
            }),
            args: args.iter().map(|s| s.to_string()).collect(),
            log_path: format!("{name}.log"),
            labels: [("podinit.test/container".to_string(), name.to_string())].into(),
            linux: Some(api::LinuxContainerConfig::default()),
            ..Default::default()
        }
    }

    /// Processes of containerd's shims for this lab (their command line names its
    /// socket): (pid, command line).
    pub fn shims(&self) -> Vec<(i32, String)> {
        let needle = format!(" -address {} ", self.sock.display());
        let mut out = Vec::new();
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
                continue;
            };
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ") + " ";
            // containerd starts a shim as `SHIM -namespace NS -id ID -address SOCK …`, its
            // argv[0] being the binary's resolved path (whatever the link's name).
            if cmd.contains(" -id ") && cmd.contains(&needle) {
                out.push((pid, cmd.trim().to_string()));
            }
        }
        out
    }

    /// The sockets of the shims of this lab's tasks (a shim killed leaves its own behind):
    /// podinit's in the lab's socket directory, and the runc shim's on containerd 1.6, in
    /// `/run/containerd/s/` named by the SHA-256 of `ADDRESS/NAMESPACE/ID`, for each sandbox
    /// and container id that containerd logged.
    pub fn shim_sockets(&self) -> Vec<PathBuf> {
        let mut own: Vec<PathBuf> = std::fs::read_dir(&self.socket_dir)
            .map(|rd| rd.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        own.extend(self.runc_shim_sockets());
        own
    }

    fn runc_shim_sockets(&self) -> Vec<PathBuf> {
        use sha2::Digest;
        let log = std::fs::read_to_string(self.dir.join("containerd.log")).unwrap_or_default();
        let mut ids: Vec<&str> = Vec::new();
        for key in ["sandbox id \\\"", "container id \\\""] {
            for (i, _) in log.match_indices(key) {
                if let Some(id) = log.get(i + key.len()..i + key.len() + 64) {
                    if id.bytes().all(|b| b.is_ascii_hexdigit()) && !ids.contains(&id) {
                        ids.push(id);
                    }
                }
            }
        }
        ids.iter()
            .map(|id| {
                let d = sha2::Sha256::digest(format!("{}/k8s.io/{id}", self.sock.display()));
                let hex: String = d.iter().map(|b| format!("{b:02x}")).collect();
                PathBuf::from("/run/containerd/s").join(hex)
            })
            .filter(|p| p.exists())
            .collect()
    }

    /// Mount points below the lab's dir.
    pub fn mounts(&self) -> Vec<String> {
        let d = self.dir.display().to_string();
        let state = self.state_dir().display().to_string();
        std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap()
            .lines()
            .filter_map(|l| l.split(' ').nth(4))
            .filter(|m| m.starts_with(&d) && *m != state)
            .map(str::to_string)
            .collect()
    }

    /// containerd's state directory: a tmpfs, as `/run` is on a node. On this machine's
    /// ext4 a churned directory made every file a runtime creates cost an inode search
    /// (BENCHMARKS.md, "One pod at a time on a settled node"), which a node never pays.
    fn state_dir(&self) -> PathBuf {
        self.dir.join("state")
    }

    fn mount_state(&self) {
        let state = self.state_dir();
        std::fs::create_dir_all(&state).unwrap();
        nix::mount::mount(
            Some("podinit-cri-state"),
            &state,
            Some("tmpfs"),
            nix::mount::MsFlags::MS_NOSUID | nix::mount::MsFlags::MS_NODEV,
            Some("mode=0711"),
        )
        .unwrap_or_else(|e| panic!("mounting a tmpfs on {}: {e}", state.display()));
    }

    /// The lab's cgroup directories, in every hierarchy, deepest first.
    pub fn cgroups(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        let rel = self.cgroup_root();
        for e in std::fs::read_dir("/sys/fs/cgroup").unwrap().flatten() {
            let root = e.path().join(rel.trim_start_matches('/'));
            collect_dirs(&root, &mut out);
        }
        if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
            collect_dirs(
                &Path::new("/sys/fs/cgroup").join(rel.trim_start_matches('/')),
                &mut out,
            );
        }
        out.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
        out
    }

    /// Cgroups of containers or sandboxes still there: any directory below a pod's.
    pub fn container_cgroups(&self) -> Vec<PathBuf> {
        let depth = |p: &PathBuf| p.components().count();
        let all = self.cgroups();
        let Some(min) = all.iter().map(depth).min() else {
            return all;
        };
        // min is the lab's own level; pods one below; containers below that.
        all.into_iter().filter(|p| depth(p) > min + 1).collect()
    }

    /// Stop and remove every pod through the CRI: errors are reported, not raised, since
    /// this runs in the drop too.
    pub fn remove_all_pods(&self) -> Vec<String> {
        let mut errors = Vec::new();
        let Some(c) = self.client.as_ref() else {
            return errors;
        };
        let pods = match c.try_list_pods() {
            Ok(p) => p,
            Err(e) => {
                errors.push(format!("ListPodSandbox: {e}"));
                return errors;
            }
        };
        for p in pods {
            if let Err(e) = c.stop_pod(&p.id) {
                errors.push(format!("StopPodSandbox {}: {e}", p.id));
            }
            if let Err(e) = c.remove_pod(&p.id) {
                errors.push(format!("RemovePodSandbox {}: {e}", p.id));
            }
        }
        errors
    }

    /// The pod cgroups the kubelet would remove once their pods are gone (containerd
    /// removes its containers' only).
    pub fn remove_pod_cgroups(&self) {
        for d in self.cgroups() {
            let _ = std::fs::remove_dir(&d);
        }
    }
}

fn collect_dirs(root: &Path, out: &mut Vec<PathBuf>) {
    if !root.is_dir() {
        return;
    }
    out.push(root.to_path_buf());
    if let Ok(rd) = std::fs::read_dir(root) {
        for e in rd.flatten() {
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                collect_dirs(&e.path(), out);
            }
        }
    }
}

impl Lab {
    /// Everything of the lab goes: its pods through the CRI while containerd answers,
    /// then containerd, the shims and whatever runs in the lab's cgroups, its mounts, the
    /// bridge, the shims' sockets, CNI's records and the dir. What the runtime left that
    /// it should not have (a shim with no pod) is returned.
    fn clean_up(&mut self) -> Vec<String> {
        // containerd may have died with the test (or been killed): then nothing to ask.
        if let Some(c) = self.containerd.as_mut() {
            if !matches!(c.try_wait(), Ok(None)) {
                self.containerd = None;
                self.client = None;
            }
        }
        let mut problems = self.remove_all_pods();
        // A shim serves until containerd deletes its last task: give it a moment.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.shims().is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let shims = self.shims();
        if !shims.is_empty() {
            problems.push(format!("shims left behind with no pod: {shims:?}"));
        }
        self.stop();
        for (pid, _) in self.shims() {
            // SAFETY: kill(2) of a shim of this lab's containerd.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        for d in self.cgroups() {
            kill_and_remove(&d);
        }
        let mut mounts = self.mounts();
        mounts.sort_by_key(|m| std::cmp::Reverse(m.len()));
        for m in mounts {
            let _ = Command::new("umount")
                .args(["-l", &m])
                .stderr(Stdio::null())
                .status();
        }
        let _ = Command::new("ip")
            .args(["link", "del", &self.bridge])
            .stderr(Stdio::null())
            .status();
        for sock in self.shim_sockets() {
            let _ = std::fs::remove_file(sock);
        }
        let net = format!("podinit-{}-", self.name);
        // CNI's cache of the lab's attachments: its network's, and loopback's, whose
        // records name a network namespace below the lab's dir.
        let dir = self.dir.display().to_string();
        if let Ok(rd) = std::fs::read_dir("/var/lib/cni/results") {
            for e in rd.flatten() {
                let ours = e.file_name().to_string_lossy().starts_with(&net)
                    || std::fs::read_to_string(e.path()).is_ok_and(|t| t.contains(&dir));
                if ours {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
        // Its state goes with it even when the dir is kept: a tmpfs left would stay.
        let _ = nix::mount::umount2(&self.state_dir(), nix::mount::MntFlags::MNT_DETACH);
        if std::env::var_os("PODINIT_CRI_KEEP").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
        let _ = std::fs::remove_dir_all(&self.socket_dir);
        // `kubepods` itself, when no other lab uses it.
        if let Ok(rd) = std::fs::read_dir("/sys/fs/cgroup") {
            for e in rd.flatten() {
                let _ = std::fs::remove_dir(e.path().join("kubepods"));
            }
        }
        self.cleaned = true;
        problems
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if self.cleaned {
            return;
        }
        if std::thread::panicking() {
            // A failed test's lab is removed below: its containerd's last words (a shim
            // that died, a call it cancelled) are the only trace of why.
            eprintln!(
                "CRI lab {}: containerd.log's last lines:\n{}",
                self.name,
                self.log_tail()
            );
        }
        let problems = self.clean_up();
        if !problems.is_empty() && !std::thread::panicking() {
            panic!("CRI lab {}: {}", self.name, problems.join("; "));
        }
    }
}

/// Where every lab's dir is: `<temp dir>/podinit-cri-<name>`.
const LAB_DIR_PREFIX: &str = "podinit-cri-";
/// The lab's record in its dir: the test process that runs it, and what the lab made
/// outside its dir (bridge, socket dir), for [`sweep_dead_labs`].
const OWNER_FILE: &str = "owner.json";

impl Lab {
    /// Records `owner` (pid and start time, so that a reused pid is never taken for it) as
    /// the lab's owner, with what the lab makes outside its dir. Written whole or not at
    /// all: a sweeper never reads half a record.
    fn write_owner(&self, owner: &(i32, String)) {
        let record = serde_json::json!({
            "pid": owner.0,
            "start_time": owner.1,
            "name": self.name,
            "bridge": self.bridge,
            "net_prefix": self.net_prefix,
            "socket_dir": self.socket_dir,
            "systemd": self.systemd,
            "containerd": match &self.daemon {
                Containerd::V1_6 => serde_json::Value::Null,
                Containerd::V2(bin) => serde_json::json!(bin),
            },
        });
        let tmp = self.dir.join(format!("{OWNER_FILE}.tmp"));
        std::fs::write(&tmp, record.to_string()).unwrap();
        std::fs::rename(&tmp, self.dir.join(OWNER_FILE)).unwrap();
    }

    /// The lab as a killed test run leaves it: `owner` (a process that has ended) recorded
    /// as its owner, containerd and every pod left running, nothing removed. containerd's
    /// process is returned for the caller to reap once a sweep has killed it.
    pub fn abandon(mut self, owner: &(i32, String)) -> Child {
        self.write_owner(owner);
        self.client = None;
        self.cleaned = true;
        self.containerd.take().expect("containerd is running")
    }

    /// A dead lab, from its record; None for a record that names what no lab makes.
    fn from_record(dir: &Path, r: &serde_json::Value) -> Option<Lab> {
        let s = |k: &str| r[k].as_str().map(str::to_string);
        let (name, bridge, socket_dir) =
            (s("name")?, s("bridge")?, PathBuf::from(s("socket_dir")?));
        let ours = bridge.starts_with("pcri")
            && dir.file_name()?.to_string_lossy() == format!("{LAB_DIR_PREFIX}{name}")
            && (socket_dir.starts_with(dir)
                || socket_dir.to_string_lossy().starts_with("/tmp/pcri-s-"));
        if !ours {
            return None;
        }
        Some(Lab {
            name,
            dir: dir.to_path_buf(),
            sock: dir.join("c.sock"),
            bridge,
            net_prefix: s("net_prefix")?,
            daemon: match r["containerd"].as_str() {
                None => Containerd::V1_6,
                Some(bin) => Containerd::V2(bin.into()),
            },
            socket_dir,
            mirror: None,
            containerd: None,
            client: None,
            cleaned: false,
            systemd: r["systemd"].as_bool().unwrap_or(false),
            env: Vec::new(),
        })
    }

    /// Every process of a dead lab SIGKILLed: its containerd and shims (their command
    /// lines name the lab's dir), and whatever works in the lab's dir (a Sandbox API PID 1
    /// starts in its shim's bundle). Containers and pauses in their own root go with the
    /// cgroups. What would not die is returned.
    fn kill_dead_processes(&self) -> Vec<String> {
        let me = std::process::id() as i32;
        let needle = format!("{}/", self.dir.display());
        let mut victims = Vec::new();
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            if pid == me {
                continue;
            }
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
                .unwrap_or_default();
            let in_dir = std::fs::read_link(format!("/proc/{pid}/cwd"))
                .is_ok_and(|cwd| cwd.starts_with(&self.dir));
            if cmd.contains(&needle) || in_dir {
                if let Some(id) = identity(pid) {
                    // SAFETY: kill(2) of a process of a lab whose owner is dead.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                    victims.push(id);
                }
            }
        }
        let deadline = Instant::now() + DAEMON_LIMIT;
        while victims.iter().any(alive) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        victims
            .iter()
            .filter(|id| alive(id))
            .map(|(pid, _)| format!("process {pid} survived SIGKILL"))
            .collect()
    }

    /// The cgroups named by the bundles of a dead lab's tasks and sandboxes (a container's
    /// `linux.cgroupsPath`, a Sandbox API sandbox's record), wherever its pods' parents put
    /// them (`k8s.io`, a `test.slice` path): their processes killed, the cgroups removed.
    fn remove_bundle_cgroups(&self) {
        let Ok(kinds) = std::fs::read_dir(self.dir.join("state")) else {
            return;
        };
        let bundles = kinds
            .flatten()
            .filter(|k| {
                k.file_name()
                    .to_string_lossy()
                    .starts_with("io.containerd.runtime.v2.")
            })
            .filter_map(|k| std::fs::read_dir(k.path()).ok())
            .flat_map(|namespaces| namespaces.flatten())
            .filter_map(|ns| std::fs::read_dir(ns.path()).ok())
            .flat_map(|ids| ids.flatten());
        for b in bundles {
            let id = b.file_name().to_string_lossy().to_string();
            let read = |f: &str| -> serde_json::Value {
                std::fs::read(b.path().join(f))
                    .ok()
                    .and_then(|t| serde_json::from_slice(&t).ok())
                    .unwrap_or_default()
            };
            let paths = [
                read("config.json")["linux"]["cgroupsPath"].clone(),
                read("podinit-sandbox.json")["cgroups_path"].clone(),
            ];
            for p in paths.iter().filter_map(|p| p.as_str()) {
                if let Ok(g) = podinit::cgroup::CgroupRoot::for_oci_path(Some(p), &id) {
                    for d in g.dirs() {
                        kill_and_remove(d);
                    }
                }
            }
        }
    }
}

/// A process's identity (pid, start time), None once it is gone.
fn identity(pid: i32) -> Option<(i32, String)> {
    Some((pid, crate::common::stat_fields(pid)?.into_iter().nth(19)?))
}

/// The process still runs: it exists, is not a zombie and is the one of `id`.
fn alive(id: &(i32, String)) -> bool {
    crate::common::stat_fields(id.0)
        .is_some_and(|f| f.first().is_some_and(|s| s != "Z") && f.get(19) == Some(&id.1))
}

/// Sweeps every lab whose owner is dead: what a killed test run left (its containerd,
/// shims, sandboxes and containers, mounts, cgroups, bridge, sockets, dir) goes. A lab
/// whose owner runs is never touched, nor one without a record (being made now, or by
/// an older test build); one sweeper per dead lab (a lock on its record). Each swept dir
/// with what could not be removed.
pub fn sweep_dead_labs() -> Vec<(PathBuf, Vec<String>)> {
    use std::os::fd::AsRawFd;
    let mut swept = Vec::new();
    let Ok(rd) = std::fs::read_dir(std::env::temp_dir()) else {
        return swept;
    };
    for e in rd.flatten() {
        if !e.file_name().to_string_lossy().starts_with(LAB_DIR_PREFIX) {
            continue;
        }
        let dir = e.path();
        let Ok(text) = std::fs::read_to_string(dir.join(OWNER_FILE)) else {
            continue;
        };
        let Ok(record) = serde_json::from_str::<serde_json::Value>(&text) else {
            continue;
        };
        let owner = (
            record["pid"].as_i64().unwrap_or(0) as i32,
            record["start_time"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        );
        if owner.0 <= 0 || alive(&owner) {
            continue;
        }
        let Ok(lock) = std::fs::File::open(dir.join(OWNER_FILE)) else {
            continue;
        };
        // SAFETY: flock(2) of a file we hold open.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            continue;
        }
        // A sweeper before us may have finished between our read and our lock.
        if !dir.join(OWNER_FILE).exists() {
            continue;
        }
        let Some(mut lab) = Lab::from_record(&dir, &record) else {
            continue;
        };
        let mut problems = lab.kill_dead_processes();
        lab.remove_bundle_cgroups();
        problems.extend(lab.clean_up());
        swept.push((dir, problems));
    }
    swept
}

// Steps and checks the CRI tests share.

/// How long a container or a pod may take to reach a state the test waits for.
pub const WAIT: Duration = Duration::from_secs(60);

/// Poll ContainerStatus until the container is in `state` (bounded by WAIT).
pub fn wait_state(lab: &Lab, id: &str, state: api::ContainerState) -> api::ContainerStatus {
    let deadline = Instant::now() + WAIT;
    loop {
        let st = lab.cri().container_status(id).status.unwrap();
        if st.state == state as i32 {
            return st;
        }
        assert!(
            Instant::now() < deadline,
            "container {id} never reached {state:?}: {st:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The `info` JSON of a verbose status (pid, runtimeSpec, …).
pub fn info(map: &HashMap<String, String>) -> serde_json::Value {
    map.get("info")
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or(serde_json::Value::Null)
}

/// The host pid of container `id`'s process, as containerd reports it.
pub fn container_pid(lab: &Lab, id: &str) -> i32 {
    let st = lab.cri().container_status(id);
    info(&st.info)["pid"]
        .as_i64()
        .unwrap_or_else(|| panic!("no pid in {:?}", st.info)) as i32
}

/// CreateContainer and StartContainer: the container's id.
pub fn run(lab: &Lab, pod: &str, pc: &api::PodSandboxConfig, cc: &api::ContainerConfig) -> String {
    let c = lab.cri();
    let name = cc.metadata.as_ref().unwrap().name.clone();
    let id = c
        .create_container(pod, cc, pc)
        .unwrap_or_else(|e| panic!("CreateContainer {name}: {e}"));
    c.start_container(&id)
        .unwrap_or_else(|e| panic!("StartContainer {name}: {e}"));
    id
}

/// Processes, mounts, cgroups and the network namespace of a removed pod are gone.
pub fn assert_pod_gone(lab: &Lab, pod: &str, pids: &[(i32, String)], netns: Option<String>) {
    assert!(
        !lab.cri().list_pods().iter().any(|p| p.id == pod),
        "pod {pod} still listed after RemovePodSandbox"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while !lab.shims().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(lab.shims(), vec![], "shims left after the pod's removal");
    assert_eq!(
        lab.shim_sockets(),
        Vec::<PathBuf>::new(),
        "shim sockets left after the pod's removal"
    );
    for id in pids {
        assert!(
            !crate::common::still_running(id),
            "process {} of pod {pod} left",
            id.0
        );
    }
    assert_eq!(
        lab.mounts(),
        Vec::<String>::new(),
        "mounts left by pod {pod}"
    );
    assert_eq!(
        lab.container_cgroups(),
        Vec::<PathBuf>::new(),
        "cgroups left by pod {pod}"
    );
    if let Some(ns) = netns {
        assert!(
            !PathBuf::from(&ns).exists(),
            "network namespace {ns} of pod {pod} left"
        );
    }
    lab.remove_pod_cgroups();
}

/// The sandbox's process (pid and start time) and the path of its network namespace, from
/// the verbose PodSandboxStatus.
pub fn sandbox_identity(lab: &Lab, pod: &str) -> ((i32, String), Option<String>) {
    let st = lab.cri().pod_status(pod);
    let i = info(&st.info);
    let pid = i["pid"]
        .as_i64()
        .unwrap_or_else(|| panic!("no sandbox pid: {:?}", st.info)) as i32;
    let netns = i["runtimeSpec"]["linux"]["namespaces"]
        .as_array()
        .and_then(|a| a.iter().find(|n| n["type"] == "network"))
        .and_then(|n| n["path"].as_str())
        .map(str::to_string);
    (crate::common::process_identity(pid), netns)
}

/// StopPodSandbox then RemovePodSandbox, as the kubelet ends a pod.
pub fn remove_pod(lab: &Lab, pod: &str) {
    lab.cri()
        .stop_pod(pod)
        .unwrap_or_else(|e| panic!("StopPodSandbox {pod}: {e}"));
    lab.cri()
        .remove_pod(pod)
        .unwrap_or_else(|e| panic!("RemovePodSandbox {pod}: {e}"));
}
