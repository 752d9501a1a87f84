//! `podinit run`: admission, the sandbox, and the outer process (DESIGN.md §1).
//!
//! The outer process stays in the caller's namespaces: it admits the manifest (exit 2 with
//! nothing created on bad input), makes the state dir and the pod cgroup, clones the
//! supervisor as PID 1 of new pid/net/ipc/uts/mount namespaces, relays SIGTERM/SIGINT to
//! it, and when it is gone removes whatever is left (exit 3 if the sandbox failed).

use k8s_openapi::api::core::v1::{Container, Pod};
use std::collections::BTreeMap;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use crate::bundle::{self, Bundle, HostVolume};
use crate::pod::{Kind, PodPlan};
use crate::sandbox::cgroup::{CgroupRoot, Group};
use crate::sandbox::statedir::StateDir;
use crate::supervisor::{self, containers::Ctr, signals::SignalPipe, EXIT_SANDBOX};

pub const EXIT_INVALID: i32 = 2;

/// The options of `podinit run` (CONTRACT.md §2).
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    pub manifest: PathBuf,
    pub bundles: Option<PathBuf>,
    /// `--presets DIR`.
    pub presets: Option<PathBuf>,
    pub state_dir: Option<PathBuf>,
    pub cgroup_parent: Option<String>,
    /// The status socket [default: <state dir>/pod.sock].
    pub socket: Option<PathBuf>,
    /// A network namespace to join instead of creating one (`--netns`).
    pub netns: Option<PathBuf>,
    /// `--notify-socket`.
    pub notify_socket: Option<PathBuf>,
    /// CrashLoopBackOff cap in seconds (kubelet's maxContainerRestartPeriod).
    pub max_restart_backoff: u64,
    /// `--seccomp-root`: where `Localhost` seccomp profiles are.
    pub seccomp_root: Option<PathBuf>,
}

/// kubelet's seccomp profile root (`<root-dir>/seccomp`, root-dir /var/lib/kubelet).
pub const DEFAULT_SECCOMP_ROOT: &str = "/var/lib/kubelet/seccomp";

/// A manifest that passed admission, with every image resolved to a loaded bundle.
pub struct Admission {
    pub pod: Pod,
    pub plan: PodPlan,
    /// In plan order (init containers, then app containers).
    pub containers: Vec<(Kind, Container, Bundle)>,
    /// The manifest's ConfigMaps and Secrets (sources of env and volumes).
    pub config_maps: Vec<k8s_openapi::api::core::v1::ConfigMap>,
    pub secrets: Vec<k8s_openapi::api::core::v1::Secret>,
    /// Why no PodPreset was applied, when matching ones conflicted (a Warning event).
    pub preset_conflict: Option<String>,
}

/// `--bundles`, else `$PODINIT_BUNDLES`, else `./oci-bundles`.
pub fn bundles_dir(opt: Option<&Path>) -> PathBuf {
    opt.map(Path::to_path_buf)
        .or_else(|| std::env::var_os("PODINIT_BUNDLES").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("oci-bundles"))
}

/// Load, default and validate the manifest and resolve every image. The error is the one
/// line to print (the field path first).
pub fn admit(
    manifest: &Path,
    bundles: &Path,
    presets: Option<&Path>,
    max_backoff_secs: u64,
) -> Result<Admission, String> {
    let a = crate::manifest::load_with_presets(manifest, presets).map_err(|e| e.to_string())?;
    let pod = a.pod;
    let spec = pod.spec.as_ref().ok_or("spec: Required value")?;
    let plan = PodPlan::from_pod(&pod, max_backoff_secs.saturating_mul(1000));
    let mut containers = Vec::new();
    let init = spec.init_containers.iter().flatten().enumerate();
    let app = spec.containers.iter().enumerate();
    let all = init
        .map(|(i, c)| ("initContainers", i, c))
        .chain(app.map(|(i, c)| ("containers", i, c)));
    for ((list, i, c), p) in all.zip(&plan.containers) {
        debug_assert_eq!(c.name, p.name);
        let field = format!("spec.{list}[{i}].image");
        let image = c.image.as_deref().unwrap_or_default();
        let dir = bundle::resolve(image, bundles).map_err(|e| format!("{field}: {e}"))?;
        let b = bundle::load(&dir).map_err(|e| format!("{field}: {e}"))?;
        bundle::stop_signal(&b, c)
            .map_err(|e| format!("spec.{list}[{i}].lifecycle.stopSignal: {e}"))?;
        containers.push((p.kind, c.clone(), b));
    }
    Ok(Admission {
        pod,
        plan,
        containers,
        config_maps: a.config_maps,
        secrets: a.secrets,
        preset_conflict: a.presets.conflict,
    })
}

/// The pod's hostname: `spec.hostname`, else the pod name cut to 63 characters (kubelet
/// also drops trailing '-' and '.' after cutting).
pub fn hostname(pod: &Pod) -> String {
    if let Some(h) = pod.spec.as_ref().and_then(|s| s.hostname.clone()) {
        return h;
    }
    let name = pod.metadata.name.clone().unwrap_or_default();
    if name.len() <= 63 {
        return name;
    }
    name[..63].trim_end_matches(['-', '.']).to_string()
}

/// The UTS hostname: with `setHostnameAsFQDN` and a `subdomain`, the pod's FQDN (at most
/// 64 characters, as kubelet allows).
pub fn uts_hostname(pod: &Pod) -> Result<String, String> {
    let spec = pod.spec.clone().unwrap_or_default();
    if spec.host_network == Some(true) {
        // The node's UTS namespace comes with its network: the node's name.
        return nix::unistd::gethostname()
            .map(|h| h.to_string_lossy().into_owned())
            .map_err(|e| format!("reading the node's hostname: {e}"));
    }
    let short = hostname(pod);
    let Some(sub) = spec.subdomain.filter(|s| !s.is_empty()) else {
        return Ok(short);
    };
    if spec.set_hostname_as_fqdn != Some(true) {
        return Ok(short);
    }
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let fqdn = format!(
        "{short}.{sub}.{ns}.svc.{}",
        crate::sandbox::etc_files::CLUSTER_DOMAIN
    );
    if fqdn.len() > 64 {
        return Err(format!(
            "failed to construct FQDN from pod hostname and cluster domain, FQDN {fqdn} is too long (64 characters is the max, {} characters requested)",
            fqdn.len()
        ));
    }
    Ok(fqdn)
}

/// `/run/podinit/<namespace>_<name>`.
pub fn default_state_dir(pod: &Pod) -> PathBuf {
    PathBuf::from(format!(
        "/run/podinit/{}_{}",
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or_default()
    ))
}

/// The pod cgroup's name below the parent.
fn pod_cgroup_name(pod: &Pod) -> String {
    format!(
        "podinit_{}_{}",
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

/// `podinit run`: returns the process exit status.
pub fn run(opts: &RunOptions) -> i32 {
    let bundles = bundles_dir(opts.bundles.as_deref());
    let mut adm = match admit(
        &opts.manifest,
        &bundles,
        opts.presets.as_deref(),
        opts.max_restart_backoff,
    ) {
        Ok(a) => a,
        Err(e) => {
            crate::log::error(&format!("{}: {e}", opts.manifest.display()));
            return EXIT_INVALID;
        }
    };
    // Set by the API server when it takes the pod; a manifest's own value is replaced.
    let now_ms = (crate::util::now_unix_nanos() / 1_000_000) as i64;
    adm.pod.metadata.creation_timestamp = k8s_openapi::jiff::Timestamp::from_millisecond(now_ms)
        .ok()
        .map(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time);
    let state_dir = match &opts.state_dir {
        Some(d) => d.clone(),
        None => {
            let d = default_state_dir(&adm.pod);
            let leaf = d.file_name().unwrap_or_default().len();
            if leaf > 255 {
                // A 253-character name is valid; a file name cannot hold it with the namespace.
                crate::log::error(&format!(
                    "setting up the sandbox: the default state dir {} has a last component of {leaf} bytes, more than the 255 a file name may have: give --state-dir",
                    d.display()
                ));
                return EXIT_SANDBOX;
            }
            d
        }
    };
    let sd = match StateDir::open(&state_dir) {
        Ok(sd) => sd,
        Err(e) => {
            crate::log::error(&format!("setting up the sandbox: {e}"));
            return EXIT_SANDBOX;
        }
    };
    let mut sandbox = Sandbox {
        pod_cgroup: None,
        supervisor_cgroup: None,
        cgroups: None,
        container_cgroups: Vec::new(),
        sd: Some(sd),
        exiting: None,
    };
    let code = match sandbox.launch(adm, opts) {
        Ok(code) => code,
        Err(e) => {
            crate::log::error(&format!("setting up the sandbox: {e}"));
            EXIT_SANDBOX
        }
    };
    let mut removed = sandbox.remove(code != EXIT_SANDBOX);
    // A supervisor that announced its end is waited for now: its exit status has the last
    // word, and `podinit run` never outlives a process of its pod.
    let code = match sandbox.exiting.take() {
        Some(child) => {
            let code = wait_supervisor(child.pid);
            // What it held until now: its own leaf cgroup (--cgroup-parent).
            let rest = sandbox.remove(code != EXIT_SANDBOX);
            removed = match (removed, rest) {
                (Ok(()), r) | (r, Ok(())) => r,
                (Err(a), Err(b)) => Err(format!("{a}; {b}")),
            };
            code
        }
        None => code,
    };
    if let Err(e) = removed {
        crate::log::error(&format!("cleaning up the sandbox: {e}"));
        if code == 0 {
            return EXIT_SANDBOX;
        }
    }
    code
}

/// What the outer process created, removed by `remove` whatever happened.
struct Sandbox {
    pod_cgroup: Option<Group>,
    /// The supervisor's leaf, `<pod cgroup>_supervisor` beside it.
    supervisor_cgroup: Option<Group>,
    /// Outside PID-1 mode: where the cgroups are, to remove the containers' ones, which
    /// the supervisor leaves to us (it exits meanwhile).
    cgroups: Option<CgroupRoot>,
    /// The containers' cgroups below the pod's (names; the handles are made at removal).
    container_cgroups: Vec<String>,
    sd: Option<StateDir>,
    /// The supervisor said it is done and is exiting: waited for after `remove`.
    exiting: Option<crate::util::Cloned>,
}

/// PID-1 mode (CONTRACT.md §2): a runtime made the sandbox and runs `podinit run` as its
/// process. No namespaces, no outer process: podinit moves itself to `<cgroup>/supervisor`
/// and builds the pod's tree beside it, at `<cgroup>/podinit_<ns>_<name>`, so that the pod
/// tree can be removed whole at the end while podinit itself is still running.
pub fn pid1_mode() -> bool {
    // SAFETY: getpid has no failure mode.
    unsafe { libc::getpid() == 1 }
}

impl Sandbox {
    fn launch(&mut self, adm: Admission, opts: &RunOptions) -> Result<i32, String> {
        let sd = self.sd.as_ref().expect("state dir is open");
        let cgroups =
            CgroupRoot::detect(opts.cgroup_parent.as_deref()).map_err(|e| e.to_string())?;
        let pod_cg_name = pod_cgroup_name(&adm.pod);
        let pod_cg = cgroups.group(&pod_cg_name);
        let pid1 = pid1_mode();
        // The supervisor is outside the pod cgroup: it is the shim as well as the pause
        // process, and Kubernetes charges neither the shim's memory nor the container logs
        // it writes (page cache, or RAM on a tmpfs state dir) to the pod. Inside, a
        // container filling the pod's memory limit made the supervisor the OOM killer's
        // next victim once the container's memory was reaped (-998 ranks last, not never),
        // a chatty container was OOM-killed for its logs, and the pod's CPU quota would
        // have throttled its own probes. It stays in the cgroup podinit was started in, as
        // the outer process does (no cgroup to make, join and remove: 0.75 ms a pod on v1);
        // below a parent given with --cgroup-parent it gets a leaf beside the pod's, since
        // on v2 that parent can hand controllers down only while it holds no process.
        let sup_cg = (!pid1 && opts.cgroup_parent.is_some())
            .then(|| cgroups.group(&format!("{pod_cg_name}_supervisor")));
        // Left by a run that was killed: nothing in it can still belong to a live pod,
        // since the state dir lock is ours. (The pod's own is found stale as it is made,
        // by `create_parent`.)
        if let Some(stale) = sup_cg.as_ref().filter(|g| g.exists()) {
            stale
                .destroy()
                .map_err(|e| format!("removing stale pod cgroup: {e}"))?;
        }
        if pid1 {
            // Out of the cgroup we were started in first: on v2 it can pass controllers
            // down to the pod's tree only once no process is left in it.
            let leaf = cgroups.group("supervisor");
            leaf.create().map_err(|e| e.to_string())?;
            // SAFETY: getpid has no failure mode.
            leaf.add(unsafe { libc::getpid() })
                .map_err(|e| format!("moving podinit to its leaf cgroup: {e}"))?;
        }
        cgroups.delegate_controllers();
        pod_cg.create_parent().map_err(|e| e.to_string())?;
        self.pod_cgroup = Some(pod_cg);
        let pod_spec = adm.pod.spec.as_ref().expect("admitted pod has a spec");
        let limits = pod_cgroup_resources(&crate::pod::resources::pod_limits(pod_spec))?;
        self.pod_cgroup
            .as_ref()
            .expect("just set")
            .set(&limits)
            .map_err(|e| e.to_string())?;
        if cgroups.is_v2()
            && !self
                .pod_cgroup
                .as_ref()
                .expect("just set")
                .has_controller("memory")
        {
            // No limit asked for it (set would have failed), but OOM kills go unseen.
            crate::log::warn(&format!(
                "the pod's cgroups have no memory controller, so an OOM kill is reported as Error, not OOMKilled: {}",
                crate::sandbox::cgroup::V2_DELEGATION
            ));
        }
        if let Some(leaf) = sup_cg {
            leaf.create().map_err(|e| e.to_string())?;
            self.supervisor_cgroup = Some(leaf);
        }

        let hostname = uts_hostname(&adm.pod)?;
        // Outside PID-1 mode the containers' cgroups are ours to remove (`remove`).
        self.cgroups = (!pid1).then(|| cgroups.clone());
        let mut ctrs = Vec::new();
        for (kind, c, b) in adm.containers {
            let dir = sd.container_dir(&c.name);
            self.container_cgroups
                .push(crate::supervisor::containers::cgroup_name(
                    &pod_cg_name,
                    &c.name,
                ));
            ctrs.push(Ctr::new(
                c.name.clone(),
                kind,
                c,
                b,
                dir,
                &cgroups,
                &pod_cg_name,
            )?);
        }

        if pid1 && opts.netns.is_some() {
            return Err(
                "--netns cannot be used in PID-1 mode: podinit uses the namespaces it was started in"
                    .into(),
            );
        }
        let cfg = supervisor::Config {
            pod: adm.pod,
            plan: adm.plan,
            containers: ctrs,
            volumes: BTreeMap::new(),
            hostname,
            socket: opts
                .socket
                .clone()
                .unwrap_or_else(|| sd.root.join("pod.sock")),
            // Made here, in podinit's own network namespace: an abstract $NOTIFY_SOCKET is
            // only reachable from there.
            notifier: crate::status::notify::Notifier::new(
                opts.notify_socket.clone(),
                std::env::var("NOTIFY_SOCKET")
                    .ok()
                    .filter(|s| !s.is_empty()),
            ),
            bundles: bundles_dir(opts.bundles.as_deref()),
            seccomp_root: opts
                .seccomp_root
                .clone()
                .unwrap_or_else(|| PathBuf::from(DEFAULT_SECCOMP_ROOT)),
            cgroups: cgroups.clone(),
            pod_cgroup: pod_cg_name.clone(),
            private_mounts: !pid1,
            pod_files: Vec::new(),
            missing_cluster_dns: false,
            pod_ips: Vec::new(),
            preset_conflict: adm.preset_conflict,
            config_maps: adm.config_maps,
            secrets: adm.secrets,
        };
        if pid1 {
            return Ok(supervise(cfg, sd, true, false));
        }

        // Block the signals we relay until the relay is in place; the supervisor inherits
        // the mask and unblocks once its own handlers are installed.
        let relay = nix::sys::signal::SigSet::from_iter([
            nix::sys::signal::Signal::SIGTERM,
            nix::sys::signal::Signal::SIGINT,
        ]);
        let _ = relay.thread_block();
        // Held open by the outer process for as long as it lives: the supervisor checks it
        // for a hangup once its parent-death signal is set, in case we died before that.
        let (alive_r, alive_w) =
            nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| format!("pipe: {e}"))?;
        // The supervisor writes its exit status here once the pod's end is written and its
        // containers are gone, then exits: the pod's cgroups and state are removed while
        // the kernel tears its namespaces and mounts down (0.4 ms for one container, more
        // with each overlay), instead of after.
        let (done_r, done_w) =
            nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| format!("pipe: {e}"))?;
        let placement = match &self.supervisor_cgroup {
            Some(g) => g.placement().map_err(|e| e.to_string())?,
            None => crate::sandbox::cgroup::Placement {
                dir: None,
                tasks: Vec::new(),
            },
        };
        let host = HostNamespaces::of(cfg.pod.spec.as_ref().expect("admitted pod has a spec"));
        if host.network && opts.netns.is_some() {
            return Err("--netns cannot be used with spec.hostNetwork: true".into());
        }
        let netns = match &opts.netns {
            Some(p) => Some(
                std::fs::File::open(p)
                    .map_err(|e| format!("opening network namespace {}: {e}", p.display()))?,
            ),
            None => None,
        };
        let mut flags = libc::CLONE_NEWNS as u64;
        if !host.pid {
            flags |= libc::CLONE_NEWPID as u64;
        }
        if !host.ipc {
            flags |= libc::CLONE_NEWIPC as u64;
        }
        if !host.network {
            flags |= libc::CLONE_NEWUTS as u64;
            if netns.is_none() {
                flags |= libc::CLONE_NEWNET as u64;
            }
        }
        // SAFETY: podinit run is single-threaded here.
        let cloned = unsafe {
            use std::os::fd::AsFd;
            crate::util::clone3(flags, placement.dir.as_ref().map(|d| d.as_fd()))
        }
        .map_err(|e| format!("creating the pod namespaces (clone3): {e}"))?;
        let Some(child) = cloned else {
            drop((alive_w, done_r));
            if let Err(e) = crate::sandbox::cgroup::join_self(&placement.tasks) {
                crate::log::error(&format!("setting up the sandbox: {e}"));
                std::process::exit(EXIT_SANDBOX);
            }
            // SAFETY: prctl with integer arguments.
            unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) };
            if outer_is_gone(alive_r) {
                std::process::exit(EXIT_SANDBOX);
            }
            if let Some(ns) = &netns {
                use std::os::fd::AsRawFd;
                // SAFETY: setns with an fd we own.
                if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                    crate::log::error(&format!(
                        "setting up the sandbox: joining network namespace {}: {}",
                        opts.netns.as_deref().unwrap_or(Path::new("")).display(),
                        std::io::Error::last_os_error()
                    ));
                    std::process::exit(EXIT_SANDBOX);
                }
            }
            // A network namespace of our own making has loopback only: no address to read.
            let own_netns = netns.is_none() && !host.network;
            let code = supervise(cfg, sd, false, own_netns);
            let _ = nix::unistd::write(&done_w, &[code as u8]);
            std::process::exit(code);
        };
        drop((alive_r, done_w));
        let end = relay_until_end(&child, &relay, &done_r);
        drop(alive_w);
        Ok(match end {
            End::Announced(code) => {
                self.exiting = Some(child);
                code
            }
            End::Exited(code) => code,
        })
    }

    /// Remove everything the outer process created: the pod cgroup tree (killing anything
    /// left in it) and the private part of the state dir; the supervisor's leaf cgroup only
    /// once the supervisor is gone (`exiting` is None), so call again after waiting for it.
    /// `ran`: the pod ran, so its status, events and logs stay.
    fn remove(&mut self, ran: bool) -> Result<(), String> {
        let mut errs = Vec::new();
        // The containers' cgroups first (the supervisor leaves them to us): the pod's then
        // goes with one rmdir per hierarchy.
        if let Some(root) = &self.cgroups {
            for name in self.container_cgroups.drain(..) {
                if let Err(e) = root.group(&name).destroy() {
                    errs.push(e.to_string());
                }
            }
        }
        // The supervisor's leaf holds it until it has exited.
        if let Some(cg) = self.supervisor_cgroup.take_if(|_| self.exiting.is_none()) {
            if let Err(e) = cg.destroy() {
                errs.push(e.to_string());
            }
        }
        if let Some(cg) = self.pod_cgroup.take() {
            if let Err(e) = cg.destroy() {
                errs.push(e.to_string());
            }
        }
        if let Some(sd) = self.sd.take() {
            if let Err(e) = sd.finish(ran, pid1_mode()) {
                errs.push(e.to_string());
            }
        }
        if errs.is_empty() {
            Ok(())
        } else {
            Err(errs.join("; "))
        }
    }
}

/// The pod cgroup's limits as OCI resources (CFS quota over kubelet's 100 ms period).
fn pod_cgroup_resources(
    l: &crate::pod::resources::Limits,
) -> Result<oci_spec::runtime::LinuxResources, String> {
    let mut v = serde_json::json!({});
    if let Some(Some(milli)) = l.get("cpu") {
        let quota = ((milli * 100_000) / 1000).max(1000) as i64;
        v["cpu"] = serde_json::json!({"quota": quota, "period": 100_000u64});
    }
    if let Some(Some(bytes)) = l.get("memory") {
        v["memory"] = serde_json::json!({"limit": *bytes as i64});
    }
    let huge: Vec<serde_json::Value> = l
        .iter()
        .filter_map(|(k, v)| {
            let size = k.strip_prefix("hugepages-")?;
            let page = crate::quantity::hugepage_size(size).ok()?;
            v.map(|lim| serde_json::json!({"pageSize": page, "limit": lim as i64}))
        })
        .collect();
    if !huge.is_empty() {
        v["hugepageLimits"] = serde_json::json!(huge);
    }
    serde_json::from_value(v).map_err(|e| format!("pod cgroup limits: {e}"))
}

/// In the supervisor: whether the outer process died before our parent-death signal was
/// set (its end of the pipe is then closed).
fn outer_is_gone(alive: std::os::fd::OwnedFd) -> bool {
    use std::os::fd::AsFd;
    let mut fds = [nix::poll::PollFd::new(
        alive.as_fd(),
        nix::poll::PollFlags::POLLIN,
    )];
    let _ = nix::poll::poll(&mut fds, nix::poll::PollTimeout::ZERO);
    fds[0]
        .revents()
        .is_some_and(|r| r.intersects(nix::poll::PollFlags::POLLHUP))
}

/// How the supervisor's run ended, as the outer process saw it.
enum End {
    /// It wrote this exit status and is exiting (not waited for yet).
    Announced(i32),
    /// It exited (waited for): its exit code.
    Exited(i32),
}

/// Forward SIGTERM/SIGINT to the supervisor until it announces its end on `done` or exits.
fn relay_until_end(
    child: &crate::util::Cloned,
    relay: &nix::sys::signal::SigSet,
    done: &std::os::fd::OwnedFd,
) -> End {
    let sig = SignalPipe::install(&[libc::SIGTERM, libc::SIGINT]);
    let _ = relay.thread_unblock();
    let sig = match sig {
        Ok(s) => s,
        Err(e) => {
            crate::log::warn(&format!("cannot relay signals to the pod: {e}"));
            return End::Exited(wait_supervisor(child.pid));
        }
    };
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    // From here on this process only relays signals and waits. Its start-up pages are
    // given back a second from now, not at once: the supervisor was just cloned onto this
    // CPU and runs as soon as we sleep, and a short pod never needs them given back.
    let mut release = Some(PollTimeout::from(1000u16));
    loop {
        let mut fds = [
            PollFd::new(sig.fd(), PollFlags::POLLIN),
            PollFd::new(child.pidfd.as_fd(), PollFlags::POLLIN),
            PollFd::new(done.as_fd(), PollFlags::POLLIN),
        ];
        match poll(&mut fds, release.unwrap_or(PollTimeout::NONE)) {
            Ok(0) => {
                release = None;
                crate::util::release_startup_pages();
                continue;
            }
            Ok(_) => {}
            Err(_) => continue,
        }
        for s in sig.drain() {
            let _ = crate::util::pidfd_signal(&child.pidfd, s);
        }
        if fds[2].revents().is_some_and(|r| !r.is_empty()) {
            let mut code = [0u8];
            return match nix::unistd::read(done, &mut code) {
                Ok(1) => End::Announced(i32::from(code[0])),
                // Closed without a word: the supervisor is exiting, killed or crashed.
                _ => End::Exited(wait_supervisor(child.pid)),
            };
        }
        if fds[1].revents().is_some_and(|r| !r.is_empty()) {
            return End::Exited(wait_supervisor(child.pid));
        }
    }
}

/// Wait for the supervisor: its exit code, or 1 if a signal killed it (the pod cannot have
/// succeeded then). A supervisor killed by a signal (podinit never
/// sends it one that kills) could not write the pod's final status: say so on stderr.
fn wait_supervisor(pid: i32) -> i32 {
    let status = wait_raw(pid);
    if let Some(s) = status.filter(|&s| libc::WIFSIGNALED(s)) {
        crate::log::error(&format!(
            "the pod's supervisor was killed by signal {}: the pod is down, and status.json holds the last status it wrote",
            libc::WTERMSIG(s)
        ));
    }
    exit_code(status)
}

fn exit_code(status: Option<i32>) -> i32 {
    match status {
        Some(s) if libc::WIFEXITED(s) => libc::WEXITSTATUS(s),
        _ => 1,
    }
}

/// waitpid(2) for our direct child `pid`: its wait status.
fn wait_raw(pid: i32) -> Option<i32> {
    loop {
        let mut status = 0;
        // SAFETY: waitpid on our own child with a valid pointer.
        let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
        if rc == pid {
            return Some(status);
        }
        if rc < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return None;
        }
    }
}

/// In the new namespaces, as PID 1: finish the sandbox, then run the pod.
/// `cfg.volumes` is filled here, once the mount namespace is the pod's. `pid1`: the
/// namespaces are the runtime's (PID-1 mode).
/// `own_netns`: the pod's network namespace was made with the supervisor (no `--netns`),
/// so it has no address yet.
fn supervise(mut cfg: supervisor::Config, sd: &StateDir, pid1: bool, own_netns: bool) -> i32 {
    // The pause container's rank: the OOM killer takes any container before the supervisor.
    // Containers and execs set their own score as they start.
    if let Err(e) = std::fs::write(
        "/proc/self/oom_score_adj",
        crate::pod::oom_score::SANDBOX.to_string(),
    ) {
        crate::log::warn(&format!(
            "the supervisor keeps its OOM score: writing {} to /proc/self/oom_score_adj: {e}",
            crate::pod::oom_score::SANDBOX
        ));
    }
    let host = HostNamespaces::of(cfg.pod.spec.as_ref().expect("admitted pod has a spec"));
    let setup = if pid1 {
        given_namespaces(&cfg.hostname, host)
    } else {
        setup_namespaces(&cfg.hostname, host)
    };
    match setup {
        Ok(()) => {}
        Err(e) => {
            crate::log::error(&format!("setting up the sandbox: {e}"));
            return EXIT_SANDBOX;
        }
    }
    let spec = cfg.pod.spec.clone().unwrap_or_default();
    let size = |q: &str| crate::quantity::parse(q).map(|v| v.value().max(0) as u64);
    let pod_ips = if own_netns {
        Vec::new()
    } else {
        crate::sandbox::net::pod_ips()
    };
    let (cpu, mem) = crate::supervisor::node_allocatable();
    let sources = crate::manifest::env::Sources {
        pod: &cfg.pod,
        config_maps: &cfg.config_maps,
        secrets: &cfg.secrets,
        pod_ips: &pod_ips,
        host_ips: &pod_ips,
        node_cpu_milli: cpu,
        node_memory: mem,
    };
    let files_of =
        |v: &k8s_openapi::api::core::v1::Volume| crate::manifest::files::of_volume(v, &sources);
    let volumes = match crate::sandbox::volumes::prepare(&spec, sd, &size, &files_of) {
        Ok(v) => v,
        Err(e) => {
            crate::log::error(&format!("setting up the sandbox: {e}"));
            return EXIT_SANDBOX;
        }
    };
    let volumes: BTreeMap<String, HostVolume> = volumes
        .into_iter()
        .map(|(k, (p, read_only))| {
            (
                k,
                HostVolume {
                    host_path: p,
                    read_only,
                },
            )
        })
        .collect();
    cfg.volumes = volumes;
    let sysctls: Vec<(String, String)> = spec
        .security_context
        .iter()
        .flat_map(|s| s.sysctls.iter().flatten())
        .map(|s| (s.name.clone(), s.value.clone()))
        .collect();
    if let Err(e) = crate::sandbox::sysctls::apply(&sysctls) {
        crate::log::error(&format!("setting up the sandbox: {e}"));
        return EXIT_SANDBOX;
    }
    match pod_files(&cfg.pod, &pod_ips, &cfg.hostname, sd) {
        Ok((files, missing_dns)) => {
            cfg.pod_files = files;
            cfg.missing_cluster_dns = missing_dns;
        }
        Err(e) => {
            crate::log::error(&format!("setting up the sandbox: {e}"));
            return EXIT_SANDBOX;
        }
    }
    cfg.pod_ips = pod_ips;
    supervisor::run(cfg, sd)
}

/// Write the pod's /etc/hosts and /etc/resolv.conf into the state dir; returns them with
/// their destinations, and whether `ClusterFirst` fell back to the node's DNS.
fn pod_files(
    pod: &Pod,
    pod_ips: &[String],
    hostname: &str,
    sd: &StateDir,
) -> Result<(crate::sandbox::etc_files::PodFiles, bool), String> {
    use crate::sandbox::etc_files;
    let dir = sd.work().join("etc");
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let host_resolv = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
    let (resolv, missing_dns) = etc_files::resolv_conf(pod, &host_resolv);
    let mut out = Vec::new();
    for (name, text, dest) in [
        (
            "hosts",
            etc_files::hosts(
                pod,
                pod_ips,
                &self::hostname(pod),
                &std::fs::read_to_string("/etc/hosts").unwrap_or_default(),
            ),
            "/etc/hosts",
        ),
        ("resolv.conf", resolv, "/etc/resolv.conf"),
        ("hostname", format!("{hostname}\n"), "/etc/hostname"),
    ] {
        let p = dir.join(name);
        std::fs::write(&p, text).map_err(|e| format!("writing {}: {e}", p.display()))?;
        // Readable by every container user, as kubelet's are.
        let _ = std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o644));
        out.push((p, dest));
    }
    Ok((out, missing_dns))
}

/// Which of the caller's namespaces the pod uses instead of its own (`hostNetwork`, which
/// brings the node's UTS namespace with it, `hostPID`, `hostIPC`).
#[derive(Clone, Copy)]
struct HostNamespaces {
    network: bool,
    pid: bool,
    ipc: bool,
}

impl HostNamespaces {
    fn of(spec: &k8s_openapi::api::core::v1::PodSpec) -> HostNamespaces {
        HostNamespaces {
            network: spec.host_network == Some(true),
            pid: spec.host_pid == Some(true),
            ipc: spec.host_ipc == Some(true),
        }
    }
}

/// PID-1 mode: the runtime made the namespaces and mounted /proc. The hostname is set when
/// the UTS namespace lets us (it is the sandbox's own); loopback is brought up.
fn given_namespaces(hostname: &str, host: HostNamespaces) -> Result<(), String> {
    // SAFETY: prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    if host.network {
        return Ok(());
    }
    let current = nix::unistd::gethostname().ok();
    if current.as_ref().and_then(|h| h.to_str()) != Some(hostname) {
        match nix::unistd::sethostname(hostname) {
            Ok(()) | Err(nix::errno::Errno::EPERM) => {}
            Err(e) => return Err(format!("setting hostname {hostname:?}: {e}")),
        }
    }
    crate::sandbox::net::loopback_up().map_err(|e| e.to_string())
}

/// The supervisor's own view: private mount propagation, a /proc of the pod's pid
/// namespace, the hostname, loopback up; it is not dumpable (CVE-2019-5736 class). (Its
/// parent-death signal is set right after the clone.)
fn setup_namespaces(hostname: &str, host: HostNamespaces) -> Result<(), String> {
    use nix::mount::{mount, MsFlags};
    // SAFETY: prctl with integer arguments.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        if host.pid {
            // Not PID 1 of anything: the containers' orphans still come to us to reap.
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        }
    }
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_SLAVE,
        None::<&str>,
    )
    .map_err(|e| format!("making / rslave: {e}"))?;
    mount(
        Some("proc"),
        "/proc",
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None::<&str>,
    )
    .map_err(|e| format!("mounting /proc for the pod's pid namespace: {e}"))?;
    if host.network {
        return Ok(());
    }
    nix::unistd::sethostname(hostname)
        .map_err(|e| format!("setting hostname {hostname:?}: {e}"))?;
    crate::sandbox::net::loopback_up().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pod(name: &str, hostname: Option<&str>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: Some(k8s_openapi::api::core::v1::PodSpec {
                hostname: hostname.map(Into::into),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn hostname_is_the_pod_name_cut_to_63() {
        assert_eq!(hostname(&pod("web", None)), "web");
        assert_eq!(hostname(&pod("web", Some("h1"))), "h1");
        let long = format!("{}-{}", "a".repeat(62), "b".repeat(10));
        assert_eq!(hostname(&pod(&long, None)), "a".repeat(62));
    }

    #[test]
    fn state_dir_and_cgroup_names() {
        let mut p = pod("web", None);
        p.metadata.namespace = Some("prod".into());
        assert_eq!(
            default_state_dir(&p),
            PathBuf::from("/run/podinit/prod_web")
        );
        assert_eq!(pod_cgroup_name(&p), "podinit_prod_web");
    }
}
