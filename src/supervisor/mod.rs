//! The supervisor: PID 1 of the pod, one thread, one poll loop (DESIGN.md §2).
//!
//! Events in (signals, reaped children, container output, timers) and start results become
//! observations on `pod::PodState`; `pod::step` says what to do; `containers` does it.
//! This is the only place that calls `waitpid`.

mod api;
mod checks;
pub mod containers;
mod metrics;
pub mod signals;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use nix::poll::{PollFd, PollFlags, PollTimeout};
use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::AsFd;
use std::time::Instant;

use crate::api::server::{Server, Slot, Stream};
use crate::bundle::HostVolume;
use crate::pod::{self, Action, PodPlan, PodState, StartFailure};
use crate::sandbox::statedir::StateDir;
use crate::status::events::EventLog;
use crate::status::render::{self, ContainerMeta, WallClock};
use crate::status::writer::StatusWriter;
use containers::{Ctr, OutPipe, StartContext};

/// Exit status of `podinit run` when the sandbox could not be set up (CONTRACT.md §2).
pub const EXIT_SANDBOX: i32 = 3;
/// How soon a status.json that could not be written is tried again.
const STATUS_RETRY_MS: pod::Millis = 1000;

/// Everything the supervisor is given by `podinit run`.
pub struct Config {
    pub pod: Pod,
    pub plan: PodPlan,
    /// The pod's containers in `plan` order (init containers, then app containers).
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
    /// Where `Localhost` seccomp profiles are (`--seccomp-root`).
    pub seccomp_root: std::path::PathBuf,
    pub cgroups: crate::sandbox::cgroup::CgroupRoot,
    pub pod_cgroup: String,
    /// The supervisor's mount namespace is its own (not PID-1 mode): its mounts end with it.
    pub private_mounts: bool,
    /// `/etc/hosts` and `/etc/resolv.conf` of the pod, and where they go.
    pub pod_files: Vec<(std::path::PathBuf, &'static str)>,
    /// `dnsPolicy: ClusterFirst` fell back to the node's resolv.conf.
    pub missing_cluster_dns: bool,
    /// The pod's IPs, read once the sandbox's network namespace is set up.
    pub pod_ips: Vec<String>,
    /// Matching PodPresets conflicted: none was applied, and this says why.
    pub preset_conflict: Option<String>,
    /// Sources of `env.valueFrom` and `envFrom`.
    pub config_maps: Vec<k8s_openapi::api::core::v1::ConfigMap>,
    pub secrets: Vec<k8s_openapi::api::core::v1::Secret>,
}

/// The node's allocatable CPU (millicores) and memory (bytes), for `resourceFieldRef`
/// of a resource without a limit.
pub fn node_allocatable() -> (i64, i64) {
    // Asked for every container (its OOM score, its downward API defaults); read once, as
    // kubelet reads the machine's capacity once.
    static NODE: std::sync::OnceLock<(i64, i64)> = std::sync::OnceLock::new();
    *NODE.get_or_init(|| {
        // SAFETY: sysconf has no memory effects.
        let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as i64;
        // SAFETY: as above.
        let pages = unsafe { libc::sysconf(libc::_SC_PHYS_PAGES) }.max(0) as i64;
        // SAFETY: as above.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(0) as i64;
        (cpus * 1000, pages * page)
    })
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

struct Supervisor<'a> {
    cfg: Config,
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
    server: Option<Server>,
    /// Processes reaped so far (containers and orphans).
    reaped: u64,
    /// Each container's hook and probe handlers (plan order).
    handlers: Vec<checks::Handlers>,
    /// Hooks, probes and API execs in flight.
    checks: Vec<checks::InFlight>,
    /// The last token handed to a deferred API answer.
    next_token: u64,
    metrics: metrics::Metrics,
    /// When each container's current start was decided (for the start latency).
    start_requested: BTreeMap<usize, pod::Millis>,
    /// When to give back code pages that are not in the event loop's steady working set:
    /// a second after the first of a burst of container starts or API requests
    /// (`release_later`).
    release_at: Option<pod::Millis>,
}

/// Run the pod to its end; returns the exit status of `podinit run` (0 Succeeded,
/// 1 Failed, 3 sandbox failure).
pub fn run(cfg: Config, sd: &StateDir) -> i32 {
    let sig = match signals::SignalPipe::install(SIGNALS) {
        Ok(s) => s,
        Err(e) => {
            crate::log::error(&format!("installing signal handlers: {e}"));
            return EXIT_SANDBOX;
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
            return EXIT_SANDBOX;
        }
    };
    let server = match Server::bind(&cfg.socket) {
        Ok(s) => s,
        Err(e) => {
            crate::log::error(&format!("setting up the sandbox: {e}"));
            return EXIT_SANDBOX;
        }
    };
    let st = PodState::new(&cfg.plan);
    // Probes and hooks go to the pod's IP, or loopback where the pod has none.
    let host = cfg
        .pod_ips
        .first()
        .cloned()
        .unwrap_or_else(|| "127.0.0.1".into());
    let handlers = cfg
        .containers
        .iter()
        .map(|c| checks::Handlers::of(&c.spec, c.kind, &host))
        .collect();
    let status = StatusWriter::new(sd.status_file(), cfg.pod.clone());
    let mut s = Supervisor {
        cfg,
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
        server: Some(server),
        reaped: 0,
        handlers,
        checks: Vec::new(),
        next_token: 0,
        metrics: Default::default(),
        start_requested: BTreeMap::new(),
        release_at: None,
    };
    let now = s.now();
    s.st.on_sandbox_ready(now);
    if let Some(c) = s.cfg.preset_conflict.take() {
        s.event(pod::events::preset_conflict(&c));
    }
    if s.cfg.missing_cluster_dns {
        s.event(pod::events::missing_cluster_dns(&s.cfg.plan));
    }
    // Pending, its containers being created: what a watcher sees first, as from kubelet.
    s.write_status();
    let code = s.run_loop(&sig);
    s.teardown();
    code
}

impl Supervisor<'_> {
    fn now(&self) -> pod::Millis {
        self.epoch.elapsed().as_millis() as pod::Millis
    }

    fn wall(&self) -> Time {
        self.clock.at(self.now())
    }

    fn run_loop(&mut self, sig: &signals::SignalPipe) -> i32 {
        loop {
            if self.decide() {
                self.write_status();
                return match pod::phase(&self.cfg.plan, &self.st) {
                    pod::PodPhase::Succeeded => 0,
                    _ => 1,
                };
            }
            self.write_status();
            if self.release_at.is_some_and(|t| t <= self.now()) {
                self.release_at = None;
                crate::util::release_startup_pages();
            }
            self.wait_and_observe(sig);
        }
    }

    /// Apply `pod::step` until it has nothing more to do now. Returns true when the pod has
    /// finished.
    fn decide(&mut self) -> bool {
        // Each round carries out actions that may change state (a failed start, a hook
        // skipped); a pod has few containers, so a few rounds settle it.
        for _ in 0..64 {
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
                        let c = &self.cfg.containers[i];
                        c.signal(c.stop_signal);
                    }
                    Action::Kill(i) => self.cfg.containers[i].kill(),
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
        let e = self
            .events
            .record(e.type_.as_str(), e.reason.as_str(), &e.message, fp, at);
        let mut line = serde_json::to_vec(e).unwrap_or_default();
        line.push(b'\n');
        if let Some(srv) = &mut self.server {
            srv.broadcast(&Stream::Events, &line);
        }
    }

    /// Give back code pages a second from now (`util::release_startup_pages`): after
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

    fn start(&mut self, i: usize) {
        self.release_later();
        let now = self.now();
        self.start_requested.insert(i, now);
        // An ephemeral container with a target joins the target's pid namespace.
        let target_pidfd = match self.cfg.containers[i].target {
            Some(t) => match self.cfg.containers[t].run.as_ref() {
                Some(r) => r.pidfd.try_clone().ok(),
                None => {
                    let msg = format!(
                        "target container {:?} is not running",
                        self.cfg.containers[t].name
                    );
                    self.st
                        .on_start_failed(&self.cfg.plan, i, StartFailure::Create, &msg, now);
                    return;
                }
            },
            None => None,
        };
        // The environment, resolved at each start as kubelet does: a missing key keeps the
        // container waiting in CreateContainerConfigError.
        let env = {
            let (cpus, mem) = node_allocatable();
            let sources = crate::manifest::env::Sources {
                pod: &self.cfg.pod,
                config_maps: &self.cfg.config_maps,
                secrets: &self.cfg.secrets,
                pod_ips: &self.cfg.pod_ips,
                host_ips: &self.cfg.pod_ips,
                node_cpu_milli: cpus,
                node_memory: mem,
            };
            match crate::manifest::env::resolve(&self.cfg.containers[i].spec, &sources) {
                Ok(r) => r,
                Err(crate::manifest::env::ConfigError(msg)) => {
                    self.st
                        .on_start_failed(&self.cfg.plan, i, StartFailure::Config, &msg, now);
                    return;
                }
            }
        };
        for w in &env.warnings {
            self.event(pod::events::invalid_env_names(i, w));
        }
        let cx = StartContext {
            pod_spec: self.cfg.pod.spec.as_ref().expect("admitted pod has a spec"),
            volumes: &self.cfg.volumes,
            hostname: &self.cfg.hostname,
            logs_dir: &self.sd.logs(),
            pid_ns_of: target_pidfd.as_ref(),
            env: &env.env,
            pod_files: &self.cfg.pod_files,
            seccomp_root: &self.cfg.seccomp_root,
        };
        match self.cfg.containers[i].start(&cx) {
            Ok(pipes) => {
                self.pipes.extend(pipes.into_iter().map(|mut p| {
                    p.ctr = i;
                    p
                }));
                // Decided when the clone returned: the process is running before anything
                // else is seen of it (its exit), and `decide` goes on to the next start, as
                // kubelet starts a pod's containers in one sync and then reports them. One
                // that failed exits next, and its exit reports the error.
                if self.cfg.containers[i]
                    .run
                    .as_ref()
                    .is_some_and(|r| r.start_error.is_none())
                {
                    self.started(i);
                }
            }
            Err(msg) => {
                let name = &self.cfg.containers[i].name;
                crate::log::warn(&format!("container {name}: {msg}"));
                self.st
                    .on_start_failed(&self.cfg.plan, i, StartFailure::Create, &msg, now);
            }
        }
    }

    fn write_status(&mut self) {
        let meta: Vec<ContainerMeta> = self
            .cfg
            .containers
            .iter()
            .map(|c| ContainerMeta {
                image: c.spec.image.clone().unwrap_or_default(),
                image_id: c.bundle.dir.display().to_string(),
                container_id: c.container_id.clone(),
            })
            .collect();
        let status = render::pod_status(
            &self.cfg.plan,
            &self.st,
            &meta,
            &self.clock,
            &self.cfg.pod_ips,
        );
        let (changed, file) = self.status.update(&status);
        match &file {
            Err(e) if !self.status_failing => {
                crate::log::warn(&format!("{e} (retrying every {STATUS_RETRY_MS} ms)"))
            }
            Ok(()) if self.status_failing => crate::log::info(&format!(
                "{} written again",
                self.sd.root.join("status.json").display()
            )),
            _ => {}
        }
        self.status_failing = file.is_err();
        if self.status_failing {
            // The loop sleeps until the next event otherwise, leaving the file stale.
            self.wake.insert(self.now() + STATUS_RETRY_MS);
        }
        if changed {
            // The API and the watchers see the change whether the file could be written.
            let line = self.pod_line();
            if let Some(srv) = &mut self.server {
                srv.broadcast(&Stream::Pod, &line);
            }
            let phase = status.phase.clone().unwrap_or_default();
            let ready = status
                .conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == "Ready" && c.status == "True");
            self.cfg.notifier.status(&line, &phase, ready);
        }
    }

    /// Block until something happens or the next timer is due, then record what happened.
    fn wait_and_observe(&mut self, sig: &signals::SignalPipe) {
        let now = self.now();
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

        let mut server = self.server.take();
        let check_set = self.check_fds();
        let (sig_ready, pipe_ready, check_ready, notify_ready, api_ready) = {
            let mut fds = vec![PollFd::new(sig.fd(), PollFlags::POLLIN)];
            for p in &self.pipes {
                fds.push(PollFd::new(p.fd.as_fd(), PollFlags::POLLIN));
            }
            let check_base = fds.len();
            for &(fd, f, _) in &check_set {
                // SAFETY: the checks own these fds and outlive this poll.
                fds.push(PollFd::new(
                    unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) },
                    f,
                ));
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
            if let Err(e) = nix::poll::poll(&mut fds, timeout) {
                if e != nix::errno::Errno::EINTR {
                    crate::log::warn(&format!("poll: {e}"));
                }
                drop(fds);
                self.server = server;
                return;
            }
            let ready = |f: &PollFd| f.revents().is_some_and(|r| !r.is_empty());
            let sig_ready = ready(&fds[0]);
            let pipe_ready: Vec<usize> = (0..self.pipes.len())
                .filter(|k| ready(&fds[1 + k]))
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
            (sig_ready, pipe_ready, check_ready, notify_ready, api_ready)
        };
        if notify_ready {
            self.cfg.notifier.writable();
        }
        if let Some(srv) = &mut server {
            srv.service(&api_ready, &mut |req| self.handle(req));
        }
        self.server = server;

        // Output before exits: reaping drops a run's pipes and so moves the indices.
        self.read_pipes(&pipe_ready);
        // Checks before exits too: an exec handler's exit ends its check.
        self.checks_ready(&check_ready);
        self.checks_expired();
        if sig_ready {
            for s in sig.drain() {
                match s {
                    libc::SIGCHLD => self.reap(),
                    libc::SIGTERM | libc::SIGINT => self.terminate_signal(s),
                    _ => {}
                }
            }
        }
    }

    /// Container `i`'s process exec'd.
    fn started(&mut self, i: usize) {
        let now = self.now();
        if let Some(t) = self.start_requested.remove(&i) {
            let name = self.cfg.containers[i].name.clone();
            self.metrics
                .started(&name, now.saturating_sub(t) as f64 / 1000.0);
        }
        self.st.on_started(&self.cfg.plan, i, now);
    }

    fn terminate_signal(&mut self, s: i32) {
        let now = self.now();
        let grace = self.st.on_stop_signal();
        crate::log::info(&format!(
            "received {}: {}",
            crate::util::signal_name(s),
            if grace == Some(0) {
                "forcing termination"
            } else {
                "terminating the pod"
            }
        ));
        self.delete(now, grace);
    }

    /// A deletion: by a signal, `POST /v1/pod/terminate` or `podinit stop`.
    fn delete(&mut self, now: pod::Millis, grace: Option<u64>) {
        if self.st.request_deletion(&self.cfg.plan, now, grace) {
            if let Some((at, grace)) = self.st.deletion {
                self.status.set_deletion(self.clock.at(at), grace);
            }
        }
    }

    /// Reap every exited child: container main processes become observations, anything
    /// else (an orphan re-parented to us in a shared pid namespace) is just collected.
    fn reap(&mut self) {
        loop {
            let mut status = 0;
            // SAFETY: waitpid with a valid pointer; this is the only waitpid in podinit.
            let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG | libc::__WALL) };
            if pid <= 0 {
                return;
            }
            self.reaped += 1;
            if self.check_exited(pid, status) {
                continue;
            }
            let Some(i) = self
                .cfg
                .containers
                .iter()
                .position(|c| c.run.as_ref().is_some_and(|r| r.pid == pid))
            else {
                continue;
            };
            let now = self.now();
            let name = self.cfg.containers[i].name.clone();
            // Everything the process wrote is in its pipes now: log it before the exit is
            // judged (FallbackToLogsOnError reads the log).
            let own: Vec<usize> = (0..self.pipes.len())
                .filter(|&k| self.pipes[k].ctr == i)
                .collect();
            self.read_pipes(&own);
            self.drop_checks(i);
            match self.cfg.containers[i].exited(status) {
                Ok(exit) => {
                    if exit.oom_killed {
                        self.event(pod::events::oom_killing(&self.cfg.plan, i));
                    }
                    self.st.on_exited(&self.cfg.plan, i, exit, now);
                }
                Err(msg) => {
                    crate::log::warn(&format!("container {name}: {msg}"));
                    self.st
                        .on_start_failed(&self.cfg.plan, i, StartFailure::Exec, &msg, now);
                }
            }
            self.end_followers_when_done(i);
        }
    }

    /// Whether container `i`'s current run has nothing more to say: its process was reaped
    /// and both its pipes are closed. Its `follow` streams end then, as kubelet's do when
    /// the container has exited and its log is read to the end.
    fn output_done(&self, i: usize) -> bool {
        self.cfg.containers[i].run.is_none() && !self.pipes.iter().any(|p| p.ctr == i)
    }

    fn end_followers_when_done(&mut self, i: usize) {
        if !self.output_done(i) {
            return;
        }
        let Some(srv) = &mut self.server else { return };
        let name = &self.cfg.containers[i].name;
        for ts in [false, true] {
            srv.end_streams(&Stream::Log(name.clone(), ts));
        }
    }

    /// Copy ready container output into the logs (and to `follow` watchers).
    fn read_pipes(&mut self, ready: &[usize]) {
        let mut closed = Vec::new();
        let mut buf = vec![0u8; 64 << 10];
        // Each piece of output, without and with line times (`follow&timestamps`).
        let mut followed: Vec<(usize, Vec<u8>, Vec<u8>)> = Vec::new();
        for &k in ready {
            let p = &mut self.pipes[k];
            // Bounded per wake-up so that one chatty container cannot starve the loop.
            for _ in 0..16 {
                let n = match nix::unistd::read(&p.fd, &mut buf) {
                    Ok(n) => n,
                    Err(nix::errno::Errno::EAGAIN) => break,
                    Err(nix::errno::Errno::EINTR) => continue,
                    Err(_) => 0,
                };
                let (log, stream, ctr) = (p.log.clone(), p.stream, p.ctr);
                let ts = crate::util::now_unix_nanos();
                let stamp = crate::util::rfc3339_nanos(ts);
                let (mut out, mut out_ts) = (Vec::new(), Vec::new());
                let mid_line = &mut p.mid_line;
                let mut emit = |partial: bool, line: &[u8]| {
                    log.borrow_mut().record(ts, stream, partial, line);
                    if !*mid_line {
                        out_ts.extend_from_slice(stamp.as_bytes());
                        out_ts.push(b' ');
                    }
                    *mid_line = partial;
                    for o in [&mut out, &mut out_ts] {
                        o.extend_from_slice(line);
                        if !partial {
                            o.push(b'\n');
                        }
                    }
                };
                if n == 0 {
                    p.split.finish(&mut emit);
                    closed.push(k);
                } else {
                    p.split.feed(&buf[..n], &mut emit);
                }
                if !out.is_empty() {
                    followed.push((ctr, out, out_ts));
                }
                if n == 0 {
                    break;
                }
            }
        }
        for k in closed.iter().rev() {
            self.pipes.swap_remove(*k);
        }
        if let Some(srv) = &mut self.server {
            for (ctr, text, text_ts) in followed {
                let name = &self.cfg.containers[ctr].name;
                srv.broadcast(&Stream::Log(name.clone(), false), &text);
                srv.broadcast(&Stream::Log(name.clone(), true), &text_ts);
            }
        }
        if !closed.is_empty() {
            for c in 0..self.cfg.containers.len() {
                self.end_followers_when_done(c);
            }
        }
    }

    /// After the pod has ended: kill anything left, drain and close output, remove every
    /// container's cgroup and private files.
    fn teardown(&mut self) {
        for i in 0..self.cfg.containers.len() {
            self.drop_checks(i);
        }
        for c in &self.cfg.containers {
            c.kill();
        }
        let deadline = Instant::now() + std::time::Duration::from_secs(5);
        while self.cfg.containers.iter().any(|c| c.run.is_some()) && Instant::now() < deadline {
            self.reap();
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let all: Vec<usize> = (0..self.pipes.len()).collect();
        self.read_pipes(&all);
        self.pipes.clear();
        if let Some(srv) = &mut self.server {
            srv.end_streams(&Stream::Pod);
            srv.end_streams(&Stream::Events);
        }
        if self.cfg.private_mounts {
            // The outer process removes the cgroups while we exit, and the mounts go with
            // our namespace.
            return;
        }
        for c in &mut self.cfg.containers {
            if let Err(e) = c.teardown() {
                crate::log::warn(&format!("container {}: {e}", c.name));
            }
        }
    }
}
