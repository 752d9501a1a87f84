//! The supervisor: PID 1 of the pod, one thread, one poll loop (docs/architecture.md §2).
//!
//! Events in (signals, reaped children, container output, timers) and start results become
//! observations on `pod::PodState`; `pod::step` says what to do; `containers` does it.
//! This file holds the loop; what it does per event lives in files named for the job
//! (`start`, `reap`, `output`, `checks`, `status`, `api`, `teardown`, `pause`).

mod api;
mod attach;
mod checks;
pub mod containers;
mod env_files;
mod error;
pub mod images;
mod metrics;
mod output;
mod pause;
mod reap;
mod resize;
pub mod scopes;
mod start;
mod status;
mod teardown;
mod volume_usage;

pub use error::Error;
pub use start::{idmapped, node_capacity, set_up_volumes};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use nix::poll::{PollFd, PollFlags, PollTimeout};
use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::AsFd;
use std::time::Instant;

use crate::api::server::{Server, Slot, Stream};
use crate::bundle::HostVolume;
use crate::pod::{self, Action, PodPlan, PodState};
use crate::sandbox::statedir::StateDir;
use crate::status::events::EventLog;
use crate::status::render::WallClock;
use crate::status::writer::StatusWriter;
use crate::sys::signal_pipe::SignalPipe;
use containers::{Ctr, OutPipe};

/// Exit status of `podinit run` when the sandbox could not be set up (docs/interface.md §2).
pub const EXIT_SANDBOX: i32 = 3;

/// Everything the supervisor is given by `podinit run`.
pub struct Config {
    pub pod: Pod,
    pub plan: PodPlan,
    /// The pod's containers in `plan` order (init containers, then app containers); the
    /// supervisor moves each into its [`Member`] record.
    pub containers: Vec<Ctr>,
    pub volumes: BTreeMap<String, HostVolume>,
    pub hostname: String,
    /// The status socket's path.
    pub socket: std::path::PathBuf,
    /// `--notify-socket` and `$NOTIFY_SOCKET`.
    pub notifier: crate::status::notify::Notifier,
    /// For containers added later (ephemeral): where images are, the cgroup tree and the
    /// pod cgroup's name in it.
    pub bundles: std::path::PathBuf,
    /// The image store (`--images`), for images that are not bundles.
    pub images: std::path::PathBuf,
    /// Where pulls are asked for (`images::Puller`): the outer process's puller, in the
    /// host's namespaces.
    pub puller: Option<std::os::fd::OwnedFd>,
    /// Where `Localhost` seccomp profiles are (`--seccomp-root`).
    pub seccomp_root: std::path::PathBuf,
    pub cgroups: crate::cgroup::CgroupRoot,
    pub pod_cgroup: String,
    /// The supervisor's mount namespace is its own (not PID-1 mode): its mounts end with it.
    pub private_mounts: bool,
    /// `/etc/hosts` and `/etc/resolv.conf` of the pod, and where they go.
    pub pod_files: Vec<(std::path::PathBuf, &'static str)>,
    /// `dnsPolicy: ClusterFirst` fell back to the node's resolv.conf.
    pub missing_cluster_dns: bool,
    /// The pod's IPs, read once the sandbox's network namespace is set up.
    pub pod_ips: Vec<String>,
    /// The node's allocatable CPU (millicores) and memory (bytes), for `resourceFieldRef`
    /// of a resource without a limit.
    pub node_allocatable: (i64, i64),
    /// Matching PodPresets conflicted: none was applied, and this says why.
    pub preset_conflict: Option<String>,
    /// A pod run without root has no cgroups: the event's text (`pod::rootless`).
    pub without_cgroups: Option<String>,
    /// Sources of `env.valueFrom` and `envFrom`.
    pub config_maps: Vec<k8s_openapi::api::core::v1::ConfigMap>,
    pub secrets: Vec<k8s_openapi::api::core::v1::Secret>,
    /// Volumes the containers mount that could not be set up, with why: the containers
    /// wait while they are tried again (`pod::volumes`).
    pub unmounted: Vec<(String, String)>,
    /// The pod's user namespace (`hostUsers: false`), made by the outer process.
    pub userns: Option<crate::sandbox::userns::PodUserns>,
    /// The pod's image volumes, resolved at admission.
    pub image_volumes: Vec<crate::admission::image_volumes::ImageVolume>,
    /// The store's images that image volumes mount, held for the pod's life (`images rm`
    /// refuses them, and their layers stay).
    pub image_volume_holds: Vec<crate::image::store::Held>,
    /// The kernel can make recursive read-only mounts (the runtime handler's
    /// `recursiveReadOnlyMounts` feature).
    pub rro_supported: bool,
    /// With `--cgroup-driver systemd`: the pod's slice, where each container run gets a
    /// scope.
    pub scopes: Option<scopes::Scopes>,
}

impl Config {
    /// The admitted pod's spec: the one copy of each container's spec (`Ctr::spec`).
    pub fn pod_spec(&self) -> &k8s_openapi::api::core::v1::PodSpec {
        self.pod.spec.as_ref().expect("admitted pod has a spec")
    }
}

/// Signals the supervisor handles. As PID 1 it would not even see the others.
const SIGNALS: &[i32] = &[
    libc::SIGCHLD,
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGPIPE,
];

/// One container of the pod as the supervisor keeps it, everything in one record: its runs
/// (the kernel side), its hook and probe handlers, and when its current start was decided.
/// Its index is the one `pod` uses; a container added later is one push (`add`).
pub struct Member {
    pub ctr: Ctr,
    handlers: checks::Handlers,
    /// When its current start was decided (for the start latency metric).
    start_requested: Option<pod::Millis>,
    /// Its cgroup's CPU and memory values as last read back (the status's `resources`).
    observed: Option<pod::allocation::CgroupValues>,
    /// Its current start has its image volumes and waits only for its own image's pull.
    volumes_ready: bool,
}

struct Supervisor<'a> {
    /// The pod's spec and metadata are held here only: the status writer is handed
    /// `&cfg.pod` at each update.
    cfg: Config,
    containers: Vec<Member>,
    sd: &'a StateDir,
    st: PodState,
    epoch: Instant,
    clock: WallClock,
    events: EventLog,
    status: StatusWriter,
    pipes: Vec<OutPipe>,
    wake: BTreeSet<pod::Millis>,
    /// status.json could not be written (a full disk): retried on a timer, warned once.
    status_failing: bool,
    /// Whether event lines wait for room in `events.jsonl`.
    events_failing: bool,
    server: Option<Server>,
    /// Processes reaped so far (containers and orphans).
    reaped: u64,
    /// Hooks, probes and API execs in flight.
    checks: Vec<checks::InFlight>,
    /// The last token handed to a deferred API answer.
    next_token: u64,
    metrics: metrics::Metrics,
    /// When to give back code pages that are not in the event loop's steady working set:
    /// a second after the first of a burst of container starts or API requests
    /// (`release_later`).
    release_at: Option<pod::Millis>,
    /// Containers whose stdin has attach input waiting for room.
    stdin_waiting: Vec<String>,
    /// Disk emptyDirs with a size limit, measured on a timer.
    volume_usage: volume_usage::Watch,
    /// The pod's image pull back-off, by image as written (`images`).
    image_backoff: BTreeMap<String, pod::image_pull::PullBackoff>,
    /// The pod's imagePullSecrets' logins, read at the first start that needs them.
    pull_logins: Option<Vec<crate::admission::pull_logins::Login>>,
    /// The image volumes' gates: per container that mounts one and the volume's index.
    volume_gates: BTreeMap<(usize, usize), pod::image_pull::ImageGate>,
    /// PID 1 of the pod's shared pid namespace in its user namespace, while it lives.
    pause: Option<pause::Pause>,
    /// The pod-level resources kubelet allocated (`spec.resources` once admitted).
    pod_allocated: Option<k8s_openapi::api::core::v1::ResourceRequirements>,
    /// When a deferred or failed resize is tried again (the allocation manager's ticker).
    resize_retry_at: Option<pod::Millis>,
}

/// What one wait of the loop found ready: the signal pipe, the output pipes, the checks,
/// the notify socket, the API's connections and the puller's answer.
struct Ready {
    sig: bool,
    pipes: Vec<usize>,
    checks: Vec<usize>,
    notify: bool,
    api: Vec<Slot>,
    pull: bool,
}

/// Where probes and hooks connect: the pod's IP, or loopback where the pod has none.
fn probe_host(pod_ips: &[String]) -> String {
    pod_ips
        .first()
        .cloned()
        .unwrap_or_else(|| "127.0.0.1".into())
}

/// Run the pod to its end; returns the exit status of `podinit run` (0 Succeeded,
/// 1 Failed, 3 sandbox failure).
pub fn run(cfg: Config, sd: &StateDir) -> i32 {
    // The supervisor waits for the pod's whole life under this frame and the loop's: what
    // start-up needs on the stack lives in `start_up`'s, given back at the release, and
    // the supervisor itself on the heap.
    let (mut s, sig) = match start_up(cfg, sd) {
        Ok(started) => started,
        Err(code) => return code,
    };
    let code = s.run_loop(&sig);
    s.teardown();
    code
}

/// The supervisor made from `cfg`, its signal handlers installed, its event log and status
/// socket open, and the pod's first status written; or the exit status of a sandbox that
/// could not be set up.
#[inline(never)]
fn start_up(mut cfg: Config, sd: &StateDir) -> Result<(Box<Supervisor<'_>>, SignalPipe), i32> {
    let sig = match SignalPipe::install(SIGNALS) {
        Ok(s) => s,
        Err(e) => {
            crate::log::error(&format!("installing signal handlers: {e}"));
            return Err(EXIT_SANDBOX);
        }
    };
    // `podinit run` blocked these until handlers existed; they do now.
    let _ = nix::sys::signal::SigSet::from_iter([
        nix::sys::signal::Signal::SIGTERM,
        nix::sys::signal::Signal::SIGINT,
    ])
    .thread_unblock();
    let meta = cfg.pod.metadata.clone();
    let events = match EventLog::open(
        Some(&sd.events_file()),
        meta.name.as_deref().unwrap_or_default(),
        meta.namespace.as_deref().unwrap_or_default(),
        meta.uid.as_deref().unwrap_or_default(),
    ) {
        Ok(e) => e,
        Err(e) => {
            crate::log::error(&e.to_string());
            return Err(EXIT_SANDBOX);
        }
    };
    let server = match Server::bind(&cfg.socket) {
        Ok(s) => s,
        Err(e) => {
            crate::log::error(&format!("setting up the sandbox: {e}"));
            return Err(EXIT_SANDBOX);
        }
    };
    let st = PodState::new(&cfg.plan);
    let host = probe_host(&cfg.pod_ips);
    let containers = std::mem::take(&mut cfg.containers)
        .into_iter()
        .map(|ctr| Member {
            handlers: checks::Handlers::of(&ctr.spec(cfg.pod_spec()), ctr.kind, &host),
            ctr,
            start_requested: None,
            observed: None,
            volumes_ready: false,
        })
        .collect();
    let status = StatusWriter::new(sd.status_file());
    let volume_usage = volume_usage::Watch::of(cfg.pod_spec(), &cfg.volumes);
    let mut s = Box::new(Supervisor {
        cfg,
        containers,
        sd,
        st,
        epoch: Instant::now(),
        clock: WallClock {
            epoch_unix_ms: (crate::util::now_unix_nanos() / 1_000_000) as i64,
        },
        events,
        status,
        pipes: Vec::new(),
        wake: BTreeSet::new(),
        status_failing: false,
        events_failing: false,
        server: Some(server),
        reaped: 0,
        checks: Vec::new(),
        next_token: 0,
        metrics: Default::default(),
        release_at: None,
        stdin_waiting: Vec::new(),
        volume_usage,
        image_backoff: BTreeMap::new(),
        pull_logins: None,
        volume_gates: BTreeMap::new(),
        pause: None,
        pod_allocated: None,
        resize_retry_at: None,
    });
    s.pod_allocated = s.cfg.pod.spec.as_ref().and_then(|p| p.resources.clone());
    let now = s.now();
    s.st.on_sandbox_ready(now);
    for (v, e) in std::mem::take(&mut s.cfg.unmounted) {
        // Why it waits, said once in full; each FailedMount event is then said as it comes.
        crate::log::warn(&format!(
            "volume {v:?} cannot be set up: {e}; the containers wait for it (kubelet's FailedMount)"
        ));
        s.st.on_mount_failed(&v, &e, now);
    }
    if let Some(c) = s.cfg.preset_conflict.take() {
        s.event(pod::events::preset_conflict(&c));
    }
    if let Some(m) = s.cfg.without_cgroups.take() {
        s.event(pod::events::cgroups_unavailable(&m));
    }
    s.report_missing_pull_secrets();
    if s.cfg.missing_cluster_dns {
        s.event(pod::events::missing_cluster_dns(&s.cfg.plan));
    }
    // Pending, its containers being created: what a watcher sees first, as from kubelet.
    s.write_status();
    Ok((s, sig))
}

impl Supervisor<'_> {
    /// Add a container to the running pod (an ephemeral one, already in the pod's spec):
    /// its record here and its plan and state in `pod`, at the same index; the next `step`
    /// starts it.
    fn add(&mut self, ctr: Ctr) {
        let spec = ctr.spec(self.cfg.pod_spec());
        let plan = pod::ContainerPlan::of(&spec, ctr.kind);
        let handlers = checks::Handlers::of(&spec, ctr.kind, &probe_host(&self.cfg.pod_ips));
        drop(spec);
        self.containers.push(Member {
            ctr,
            handlers,
            start_requested: None,
            observed: None,
            volumes_ready: false,
        });
        pod::add_container(&mut self.cfg.plan, &mut self.st, plan);
    }

    fn now(&self) -> pod::Millis {
        self.epoch.elapsed().as_millis() as pod::Millis
    }

    fn wall(&self) -> Time {
        self.clock.at(self.now())
    }

    fn run_loop(&mut self, sig: &SignalPipe) -> i32 {
        loop {
            if let Some(code) = self.act(sig) {
                return code;
            }
            self.wait_and_observe(sig);
        }
    }

    /// One turn's decisions carried out and the status written; the exit status once the
    /// pod has finished. Not inlined: what a container's start needs on the stack is given
    /// back before the loop waits, instead of staying under the wait's frame.
    #[inline(never)]
    fn act(&mut self, sig: &SignalPipe) -> Option<i32> {
        if self.decide() {
            self.write_status();
            self.finish_writing(sig);
            return Some(match pod::phase(&self.cfg.plan, &self.st) {
                pod::PodPhase::Succeeded => 0,
                _ => 1,
            });
        }
        self.sync_resize();
        self.write_status();
        self.watch_volume_usage();
        None
    }

    /// Apply `pod::step` until it has nothing more to do now. Returns true when the pod has
    /// finished.
    fn decide(&mut self) -> bool {
        // Each round carries out actions that may change state (a failed start, a hook
        // skipped); a pod has few containers, so a few rounds settle it.
        for _ in 0..64 {
            self.abandon_pulls();
            let now = self.now();
            let actions = pod::step(&self.cfg.plan, &mut self.st, now);
            if actions.is_empty() {
                return false;
            }
            let mut changed = false;
            for a in actions {
                match a {
                    Action::Start(i) => {
                        self.start(i);
                        changed = true;
                    }
                    Action::RunPostStart(i) => {
                        self.post_start(i);
                        changed = true;
                    }
                    Action::RunPreStop(i) => {
                        self.pre_stop(i);
                        changed = true;
                    }
                    Action::RunProbe(d) => {
                        self.run_probe(d);
                        changed = true;
                    }
                    Action::Stop(i) => {
                        let c = &self.containers[i].ctr;
                        c.signal(c.stop_signal);
                    }
                    Action::Kill(i) => self.containers[i].ctr.kill(),
                    Action::MountVolumes(names) => {
                        self.mount_volumes(&names);
                        changed = true;
                    }
                    Action::WakeAt(t) => {
                        self.wake.insert(t);
                    }
                    Action::Finish => return true,
                    Action::Event(e) => self.event(e),
                }
            }
            if !changed {
                return false;
            }
        }
        false
    }

    fn event(&mut self, e: pod::EventSpec) {
        let fp = e
            .container
            .map(|i| self.cfg.plan.containers[i].field_path());
        let at = self.wall();
        let e = self.events.record(e.type_, e.reason, &e.message, fp, at);
        // The terminal hears of each event as it happens (docs/interface.md §2).
        crate::log::event(
            e.type_.as_deref() == Some("Warning"),
            e.reason.as_deref().unwrap_or(""),
            e.message.as_deref().unwrap_or(""),
            e.count.unwrap_or(1),
        );
        let mut line = serde_json::to_vec(e).unwrap_or_default();
        line.push(b'\n');
        if let Some(srv) = &mut self.server {
            srv.broadcast(&Stream::Events, &line);
        }
    }

    /// Give back code pages a second from now, in the first wait that blocks after it
    /// (`sys::pages::release_startup_pages_and_poll`): after
    /// container starts (the bulk of what runs once) and API requests (rendering, parsing),
    /// not after probes, which run every period. A release already due stays due: under
    /// steady requests or restarts the pages are still given back once a second, instead
    /// of never (a few page faults a second is the price).
    fn release_later(&mut self) {
        if self.release_at.is_none() {
            let at = self.now() + 1000;
            self.release_at = Some(at);
            self.wake.insert(at);
        }
    }

    /// Block until something happens or the next timer is due, then record what happened.
    fn wait_and_observe(&mut self, sig: &SignalPipe) {
        let now = self.now();
        let release_due = self.release_at.is_some_and(|t| t <= now);
        // A timer that came due since the loop last looked (an exec's deadline passed
        // while start-up pages were given back) is handled after a poll that does not
        // block; dropped without that, it would wait for some other event.
        let overdue = self.wake.first().is_some_and(|&t| t <= now);
        self.wake = self.wake.split_off(&(now + 1));
        // Requests read behind an exec that has been answered are served at once.
        let backlog = self.server.as_ref().is_some_and(Server::has_backlog);
        let mut due = if overdue || backlog {
            Some(0)
        } else {
            self.wake.first().map(|&t| t - now)
        };
        if let Some(d) = self.server.as_ref().and_then(Server::next_deadline) {
            let ms = d.saturating_duration_since(Instant::now()).as_millis() as u64 + 1;
            due = Some(due.map_or(ms, |t| t.min(ms)));
        }
        let timeout = match due {
            Some(ms) => PollTimeout::try_from(ms.min(60_000) as i32).unwrap_or(PollTimeout::MAX),
            None => PollTimeout::NONE,
        };

        // The pages are given back by a wait that blocks, right before it: a pod at rest
        // then has mapped back only the code of that wait. A wait that returns at once
        // leaves the release due for the next one.
        let release = release_due && timeout != PollTimeout::ZERO;
        if release {
            self.release_at = None;
        }
        self.poll_and_observe(sig, timeout, release);
    }

    /// Poll the loop's descriptors for `timeout` (giving the start-up pages back first when
    /// `release`), then record what is ready (`observe`).
    fn poll_and_observe(&mut self, sig: &SignalPipe, timeout: PollTimeout, release: bool) {
        let server = self.server.take();
        let check_set = self.check_fds();
        let stdin_set = self.stdin_fds();
        let ready = {
            let mut fds = vec![PollFd::new(sig.fd(), PollFlags::POLLIN)];
            let pull_at = fds.len();
            if let Some(fd) = &self.cfg.puller {
                fds.push(PollFd::new(fd.as_fd(), PollFlags::POLLIN));
            }
            let pipe_base = fds.len();
            for p in &self.pipes {
                fds.push(PollFd::new(p.fd.as_fd(), PollFlags::POLLIN));
            }
            let check_base = fds.len();
            for &(fd, f, _) in &check_set {
                fds.push(PollFd::new(fd, f));
            }
            let notify_at = fds.len();
            if let Some(fd) = self.cfg.notifier.pending_fd() {
                fds.push(PollFd::new(fd, PollFlags::POLLOUT));
            }
            let api_base = fds.len();
            let api_set = server.as_ref().map(Server::poll_set).unwrap_or_default();
            for (fd, want_out, _) in &api_set {
                let mut f = PollFlags::POLLIN;
                if *want_out {
                    f |= PollFlags::POLLOUT;
                }
                fds.push(PollFd::new(*fd, f));
            }
            for &fd in &stdin_set {
                fds.push(PollFd::new(fd, PollFlags::POLLOUT));
            }
            let polled = if release {
                crate::sys::pages::release_startup_pages_and_poll(&mut fds, timeout)
            } else {
                nix::poll::poll(&mut fds, timeout)
            };
            if let Err(e) = polled {
                if e != nix::errno::Errno::EINTR {
                    crate::log::warn(&format!("poll: {e}"));
                }
                drop(fds);
                self.server = server;
                return;
            }
            let ready = |f: &PollFd| f.revents().is_some_and(|r| !r.is_empty());
            let sig_ready = ready(&fds[0]);
            let pull_ready = pipe_base > pull_at && ready(&fds[pull_at]);
            let pipe_ready: Vec<usize> = (0..self.pipes.len())
                .filter(|k| ready(&fds[pipe_base + k]))
                .collect();
            let mut check_ready: Vec<usize> = check_set
                .iter()
                .enumerate()
                .filter(|(k, _)| ready(&fds[check_base + k]))
                .map(|(_, &(_, _, c))| c)
                .collect();
            check_ready.dedup();
            let api_ready: Vec<Slot> = api_set
                .iter()
                .enumerate()
                .filter(|(k, _)| ready(&fds[api_base + k]))
                .map(|(_, (_, _, slot))| *slot)
                .collect();
            let notify_ready = api_base > notify_at && ready(&fds[notify_at]);
            Ready {
                sig: sig_ready,
                pipes: pipe_ready,
                checks: check_ready,
                notify: notify_ready,
                api: api_ready,
                pull: pull_ready,
            }
        };
        self.observe(sig, server, ready);
    }

    /// Record what the wait found ready. Not inlined: the frames of the handlers (an API
    /// request's, a reaped container's) are made after the wait, not kept under it.
    #[inline(never)]
    fn observe(&mut self, sig: &SignalPipe, mut server: Option<Server>, ready: Ready) {
        if ready.pull {
            self.pulls_ready();
        }
        if ready.notify {
            self.cfg.notifier.writable();
        }
        if let Some(srv) = &mut server {
            srv.service(&ready.api, &mut |req| self.handle(req));
        }
        self.server = server;
        // Every turn: input read now, or room made in a stdin the loop waited on.
        self.pump_attach_input();

        // Output before exits: reaping drops a run's pipes and so moves the indices.
        self.read_pipes(&ready.pipes);
        // Checks before exits too: an exec handler's exit ends its check.
        self.checks_ready(&ready.checks);
        self.checks_expired();
        if ready.sig {
            for s in sig.drain() {
                match s {
                    libc::SIGCHLD => self.reap(),
                    libc::SIGTERM | libc::SIGINT => self.terminate_signal(s),
                    _ => {}
                }
            }
        }
    }
}
