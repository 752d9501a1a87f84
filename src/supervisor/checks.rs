//! Hooks and probes in flight: the supervisor starts them when `pod` says so, polls them
//! with everything else, and turns their outcomes into observations. A check belongs to
//! one run of one container; when that run ends, its checks are dropped.

use super::Supervisor;
use crate::pod::probes::{Due, ProbeKind, Verdict};
use crate::pod::{self, Kind, Millis};
use crate::probe::{Check, Handler, HandlerError, Outcome, Use};
use k8s_openapi::api::core::v1::Container;

/// Output kept per stream of an API exec.
const API_EXEC_OUTPUT: usize = 1 << 20;

/// What a check is for.
#[derive(Clone, Copy, Debug)]
pub enum Owner {
    Probe(Due),
    PostStart {
        ctr: usize,
        instance: u32,
    },
    PreStop {
        ctr: usize,
        instance: u32,
    },
    /// `POST /v1/containers/NAME/exec`: the answer goes to the deferred request `token`.
    ApiExec {
        ctr: usize,
        token: u64,
        timeout_s: u64,
    },
}

impl Owner {
    fn ctr(&self) -> usize {
        match *self {
            Owner::Probe(d) => d.ctr,
            Owner::PostStart { ctr, .. }
            | Owner::PreStop { ctr, .. }
            | Owner::ApiExec { ctr, .. } => ctr,
        }
    }
}

pub struct InFlight {
    pub owner: Owner,
    pub check: Check,
    pub deadline: Option<Millis>,
    /// When it started (probe durations).
    started: Millis,
    /// The command or URL, for hook messages.
    what: String,
}

/// A container's handlers, resolved once from its spec.
#[derive(Default)]
pub struct Handlers {
    pub post_start: Option<Result<Handler, HandlerError>>,
    pub pre_stop: Option<Result<Handler, HandlerError>>,
    pub probes: Vec<(ProbeKind, Result<Handler, HandlerError>)>,
}

impl Handlers {
    pub fn of(c: &Container, kind: Kind, host: &str) -> Handlers {
        let lc = c.lifecycle.as_ref();
        let hook = |h: Option<&k8s_openapi::api::core::v1::LifecycleHandler>| {
            h.map(|h| Handler::from_hook(h, c, host))
        };
        let mut probes = Vec::new();
        if kind.has_probes() {
            for (k, p) in [
                (ProbeKind::Startup, &c.startup_probe),
                (ProbeKind::Liveness, &c.liveness_probe),
                (ProbeKind::Readiness, &c.readiness_probe),
            ] {
                if let Some(p) = p {
                    probes.push((k, Handler::from_probe(p, c, host)));
                }
            }
        }
        Handlers {
            post_start: hook(lc.and_then(|l| l.post_start.as_ref())),
            pre_stop: hook(lc.and_then(|l| l.pre_stop.as_ref())),
            probes,
        }
    }
}

fn describe(h: &Handler) -> String {
    match h {
        // Go's %v of a []string, as kubelet prints the command.
        Handler::Exec(cmd) => format!("[{}]", cmd.join(" ")),
        Handler::Http(g) => g.path.clone(),
        Handler::Tcp { host, port } => format!("{host}:{port}"),
        Handler::Grpc { port, .. } => format!(":{port}"),
        Handler::Sleep { ms } => format!("{}s", ms / 1000),
    }
}

impl Supervisor<'_> {
    fn instance(&self, i: usize) -> u32 {
        self.st.containers[i].restart_count
    }

    /// Start a handler for `owner`; an error that prevents it from running at all is its
    /// failed outcome.
    fn launch(&mut self, owner: Owner, h: &Handler, use_: Use, timeout: Option<Millis>) {
        let now = self.now();
        let what = describe(h);
        let started = match h {
            Handler::Exec(cmd) => self.containers[owner.ctr()]
                .ctr
                .exec(cmd, self.pod_user_ns())
                .map(Check::Exec)
                .map_err(|e| e.to_string()),
            Handler::Sleep { ms } => {
                // A sleep is a deadline of its own.
                self.checks.push(InFlight {
                    owner,
                    check: Check::Sleep,
                    deadline: Some(now + ms),
                    started: now,
                    what,
                });
                self.wake.insert(now + ms);
                return;
            }
            h => Check::start_net(h, use_).map_err(|e| e.to_string()),
        };
        match started {
            Ok(check) => {
                let deadline = timeout.map(|t| now + t);
                if let Some(d) = deadline {
                    self.wake.insert(d);
                }
                self.checks.push(InFlight {
                    owner,
                    check,
                    deadline,
                    started: now,
                    what,
                });
            }
            // An exec that could not start is a prober error in kubelet's terms; a
            // network handler's refusal (a closed port) is the probe's failure.
            Err(msg) if matches!(h, Handler::Exec(_)) => {
                self.check_done(owner, &what, Outcome::error(msg), None)
            }
            Err(msg) => self.check_done(owner, &what, Outcome::fail(msg), None),
        }
    }

    /// Container `i`'s process runs: its postStart, else it is started at once.
    pub(super) fn post_start(&mut self, i: usize) {
        match self.containers[i].handlers.post_start.clone() {
            None => self.post_start_done(i),
            Some(Ok(h)) => {
                let instance = self.instance(i);
                self.launch(Owner::PostStart { ctr: i, instance }, &h, Use::Hook, None);
            }
            Some(Err(e)) => {
                let instance = self.instance(i);
                self.check_done(
                    Owner::PostStart { ctr: i, instance },
                    "",
                    Outcome::fail(e.to_string()),
                    None,
                );
            }
        }
    }

    fn post_start_done(&mut self, i: usize) {
        let now = self.now();
        self.st.on_post_start_done(&self.cfg.plan, i, now);
    }

    /// `pod` asked for container `i`'s preStop.
    pub(super) fn pre_stop(&mut self, i: usize) {
        let instance = self.instance(i);
        let owner = Owner::PreStop { ctr: i, instance };
        match self.containers[i].handlers.pre_stop.clone() {
            Some(Ok(h)) => self.launch(owner, &h, Use::Hook, None),
            Some(Err(e)) => self.check_done(owner, "", Outcome::fail(e.to_string()), None),
            None => self.st.on_pre_stop_done(i),
        }
    }

    /// `pod` asked for this probe.
    pub(super) fn run_probe(&mut self, d: Due) {
        let h = self.containers[d.ctr]
            .handlers
            .probes
            .iter()
            .find(|(k, _)| *k == d.kind)
            .map(|(_, h)| h.clone());
        match h {
            Some(Ok(h)) => self.launch(Owner::Probe(d), &h, Use::Probe, Some(d.timeout_ms)),
            Some(Err(e)) => {
                self.check_done(Owner::Probe(d), "", Outcome::error(e.to_string()), None)
            }
            None => {}
        }
    }

    /// Run `command` in container `i` for the API; the reply is deferred until it exits.
    pub(super) fn api_exec(
        &mut self,
        i: usize,
        command: &[String],
        timeout_s: u64,
    ) -> Result<u64, crate::runtime::Error> {
        let check =
            self.containers[i]
                .ctr
                .exec_with(command, true, API_EXEC_OUTPUT, self.pod_user_ns())?;
        self.next_token += 1;
        let token = self.next_token;
        let deadline = (timeout_s > 0).then(|| self.now() + timeout_s * 1000);
        if let Some(d) = deadline {
            self.wake.insert(d);
        }
        self.checks.push(InFlight {
            owner: Owner::ApiExec {
                ctr: i,
                token,
                timeout_s,
            },
            check: Check::Exec(check),
            deadline,
            started: self.now(),
            what: command.join(" "),
        });
        Ok(token)
    }

    /// Answer an API exec: its exit, or its timeout (`status` None).
    fn api_exec_done(
        &mut self,
        token: u64,
        timeout_s: u64,
        what: &str,
        check: &mut Check,
        status: Option<i32>,
    ) {
        let Check::Exec(e) = check else { return };
        let (code, body) = match status {
            Some(st) => {
                e.finish();
                let (out, err, start_error) = e.take_output();
                let (exit_code, stderr) = match start_error {
                    // The command could not be started (kubectl shows 126 for this).
                    Some(msg) => (126, format!("{}{msg}\n", String::from_utf8_lossy(&err))),
                    None => (
                        pod::termination::exit_code(st).0,
                        String::from_utf8_lossy(&err).into_owned(),
                    ),
                };
                let v = serde_json::json!({
                    "exitCode": exit_code,
                    "stdout": String::from_utf8_lossy(&out),
                    "stderr": stderr,
                });
                (200, serde_json::to_vec(&v).unwrap_or_default())
            }
            None => {
                e.kill();
                let msg = format!("command {what:?} timed out after {timeout_s}s");
                let e = crate::api::Error::Timeout(msg);
                (e.status().0, e.body())
            }
        };
        if let Some(srv) = &mut self.server {
            srv.complete(token, code, "application/json", &body);
        }
    }

    /// A check ended. `exit`: the wait status of an exec handler's process.
    fn check_done(&mut self, owner: Owner, what: &str, o: Outcome, exit: Option<i32>) {
        let now = self.now();
        match owner {
            // Answered where the check ends (it needs the check's output).
            Owner::ApiExec { .. } => {}
            Owner::Probe(d) => {
                if let Some(w) = &o.warning {
                    self.event(pod::events::probe_warning(d.ctr, d.kind, w));
                }
                let output = o.output.trim_end().to_string();
                for e in self.st.on_probe_result(
                    &self.cfg.plan,
                    d,
                    Verdict::of(o.ok, o.errored),
                    &output,
                    now,
                ) {
                    self.event(e);
                }
            }
            Owner::PostStart { ctr, instance } | Owner::PreStop { ctr, instance } => {
                if self.instance(ctr) != instance || !self.st.containers[ctr].is_active() {
                    return;
                }
                let post = matches!(owner, Owner::PostStart { .. });
                if o.ok {
                    if post {
                        self.post_start_done(ctr);
                    } else {
                        self.st.on_pre_stop_done(ctr);
                    }
                    return;
                }
                let msg = self.hook_message(ctr, what, &o, exit);
                crate::log::warn(&msg);
                if post {
                    self.st.on_post_start_failed(&self.cfg.plan, ctr, &msg, now);
                } else {
                    self.event(pod::events::pre_stop_failed(ctr));
                    self.st.on_pre_stop_done(ctr);
                }
            }
        }
    }

    /// kubelet's wording of a failed hook (`pod::events::hook_failure`).
    fn hook_message(&self, ctr: usize, what: &str, o: &Outcome, exit: Option<i32>) -> String {
        let how = exit.map(crate::probe::exec::ExecCheck::describe_exit);
        pod::events::hook_failure(&self.cfg.plan, ctr, what, &o.output, how.as_deref())
    }

    /// Poll set of the checks: (fd, flags, index of the check).
    pub(super) fn check_fds(
        &self,
    ) -> Vec<(std::os::fd::BorrowedFd<'_>, nix::poll::PollFlags, usize)> {
        let mut v = Vec::new();
        for (k, c) in self.checks.iter().enumerate() {
            for (fd, f) in c.check.interest() {
                v.push((fd, f, k));
            }
        }
        v
    }

    /// Checks with a ready fd make progress; finished ones report.
    pub(super) fn checks_ready(&mut self, ready: &[usize]) {
        let mut done = Vec::new();
        for &k in ready {
            if let Some(o) = self.checks[k].check.on_ready() {
                done.push((k, o, None));
            }
        }
        self.finish_checks(done);
    }

    /// Checks past their deadline end (a sleep succeeds, an API exec is answered with a
    /// timeout, anything else times out).
    pub(super) fn checks_expired(&mut self) {
        let now = self.now();
        let expired = |c: &InFlight| c.deadline.is_some_and(|d| d <= now);
        let (api, rest): (Vec<InFlight>, Vec<InFlight>) = std::mem::take(&mut self.checks)
            .into_iter()
            .partition(|c| matches!(c.owner, Owner::ApiExec { .. }) && expired(c));
        self.checks = rest;
        for mut c in api {
            if let Owner::ApiExec {
                token, timeout_s, ..
            } = c.owner
            {
                // Killed here; its process is reaped later like any orphan.
                self.api_exec_done(token, timeout_s, &c.what, &mut c.check, None);
            }
        }
        let mut done = Vec::new();
        for (k, c) in self.checks.iter_mut().enumerate() {
            if expired(c) {
                done.push((k, c.check.on_deadline(), None));
            }
        }
        self.finish_checks(done);
    }

    /// A reaped pid: if it is an exec handler's, that check ends. Returns whether it was.
    pub(super) fn check_exited(&mut self, pid: i32, status: i32) -> bool {
        let Some(k) = self.checks.iter().position(|c| c.check.pid() == Some(pid)) else {
            return false;
        };
        if let Owner::ApiExec {
            token, timeout_s, ..
        } = self.checks[k].owner
        {
            let mut c = self.checks.swap_remove(k);
            self.api_exec_done(token, timeout_s, &c.what, &mut c.check, Some(status));
            return true;
        }
        let o = match &mut self.checks[k].check {
            Check::Exec(e) => e.on_exit(status),
            _ => return false,
        };
        self.finish_checks(vec![(k, o, Some(status))]);
        true
    }

    fn finish_checks(&mut self, mut done: Vec<(usize, Outcome, Option<i32>)>) {
        done.sort_by_key(|d| std::cmp::Reverse(d.0));
        let mut finished = Vec::new();
        for (k, o, exit) in done {
            let c = self.checks.swap_remove(k);
            finished.push((c, o, exit));
        }
        for (c, o, exit) in finished.into_iter().rev() {
            if let Owner::Probe(d) = c.owner {
                let secs = self.now().saturating_sub(c.started) as f64 / 1000.0;
                let name = self.containers[d.ctr].ctr.name.clone();
                self.metrics.probe(&name, d.kind.lower(), o.ok, secs);
            }
            self.check_done(c.owner, &c.what, o, exit);
        }
    }

    /// Container `i`'s run ended: its checks go (exec ones are killed; the kernel would
    /// have taken them with the cgroup anyway).
    pub(super) fn drop_checks(&mut self, i: usize) {
        self.checks.retain(|c| {
            // An API exec ends with its process, which the container's cgroup kill takes
            // down: its answer comes from that exit.
            let mine = c.owner.ctr() == i && !matches!(c.owner, Owner::ApiExec { .. });
            if mine {
                if let Check::Exec(e) = &c.check {
                    e.kill();
                }
            }
            !mine
        });
    }
}
