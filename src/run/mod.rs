//! `podinit run`: admission, the sandbox, and the outer process (docs/architecture.md §1).
//!
//! The outer process stays in the caller's namespaces: it admits the manifest (exit 2 with
//! nothing created on bad input), makes the state dir and the pod cgroup, clones the
//! supervisor as PID 1 of new pid/net/ipc/uts/mount namespaces, relays SIGTERM/SIGINT to
//! it, and when it is gone removes whatever is left (exit 3 if the sandbox failed). If the
//! supervisor dies without writing the pod's end, the outer process writes it.
//!
//! One file a stage, in the order `run` takes them: `admission`, the state dir (`names`),
//! kubelet's admission on the node (`node`, then `admission::reject` or `bind`),
//! `pod_cgroup`, the supervisor's `config`, `namespaces` (its clone, or PID-1 mode's given
//! ones) and what it finishes inside them (`supervise`), the outer process's `relay`,
//! `lost` (the final status of a lost supervisor) and `cleanup`.

mod admission;
mod cleanup;
mod config;
mod error;
mod lost;
mod names;
mod namespaces;
mod node;
mod pod_cgroup;
mod puller;
mod relay;
pub mod rootless;
mod supervise;
mod userns;

pub use crate::admission::{admit_manifest, Admission, DirPaths, Dirs};
pub use error::Error;
pub use names::{default_state_dir, hostname, state_root, uts_hostname, STATE_ROOT};

use std::path::PathBuf;

use crate::sandbox::statedir::StateDir;
use relay::End;

pub const EXIT_INVALID: i32 = 2;

/// Print a stage's error as the command line does and give its exit status.
fn fail(e: Error) -> i32 {
    crate::cli::exit::Failure::from(e).report()
}

/// The options of `podinit run` (docs/interface.md §2).
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    pub manifest: PathBuf,
    pub bundles: Option<PathBuf>,
    /// `--images DIR`: the image store.
    pub images: Option<PathBuf>,
    /// `--registry-ca FILE`: CA certificates registries are checked against, beside the
    /// system's.
    pub registry_ca: Vec<PathBuf>,
    /// `--insecure-registry HOST[:PORT],…`: reached over plain HTTP.
    pub insecure_registries: Vec<String>,
    /// `--presets DIR`.
    pub presets: Option<PathBuf>,
    pub state_dir: Option<PathBuf>,
    pub cgroup_parent: Option<String>,
    /// `--cgroup-driver`: who makes the pod's cgroups.
    pub cgroup_driver: CgroupDriver,
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
    /// `--node-name` [default: the host's name, lowercased].
    pub node_name: Option<String>,
    /// `--node-labels k=v,…`: added to kubelet's own node labels.
    pub node_labels: Option<String>,
    /// `--system-reserved cpu=…,memory=…`: kept back from the node's allocatable.
    pub system_reserved: Option<String>,
    /// `--node-resources name=count,…`: the node's extended resources.
    pub node_resources: Option<String>,
}

/// kubelet's `--cgroup-driver` (docs/interface.md §The systemd cgroup driver).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CgroupDriver {
    /// podinit makes the cgroups itself, below `--cgroup-parent`.
    #[default]
    Cgroupfs,
    /// systemd makes them: a transient slice for the pod, a scope for each container.
    Systemd,
}

impl RunOptions {
    /// The bundles directory and the image store these options name.
    pub fn dir_paths(&self) -> DirPaths {
        DirPaths::of(self.bundles.as_deref(), self.images.as_deref())
    }
}

/// kubelet's seccomp profile root (`<root-dir>/seccomp`, root-dir /var/lib/kubelet).
pub const DEFAULT_SECCOMP_ROOT: &str = "/var/lib/kubelet/seccomp";

/// `podinit run`: returns the process exit status.
pub fn run(opts: &RunOptions) -> i32 {
    // The outer process and the supervisor wait for the pod's whole life: their heap is
    // laid out to be given back (docs/architecture.md §2).
    crate::sys::pages::without_thread_cache();
    let node_flags = match node::Flags::parse(opts).and_then(|f| {
        puller::check_options(&opts.registry_ca, &opts.insecure_registries)?;
        check_cgroup_parent(opts)?;
        Ok(f)
    }) {
        Ok(f) => f,
        Err(e) => return fail(e),
    };
    let mut adm = match admission::for_run(opts) {
        Ok(a) => a,
        Err(e) => return fail(e),
    };
    let private = match opts.state_dir {
        Some(_) => Ok(()),
        None if crate::sys::rootless::rootless() => {
            crate::sys::rootless::private_dir(&state_root()).map_err(Error::from)
        }
        None => Ok(()),
    };
    let sd = private
        .and_then(|()| names::state_dir(&adm.pod, opts.state_dir.as_deref()))
        .and_then(|d| StateDir::open(&d).map_err(Error::Os));
    let sd = match sd {
        Ok(sd) => sd,
        Err(e) => return fail(e),
    };
    // kubelet's admit handlers, before any cgroup, namespace or container exists.
    match node_flags.node(&sd.root) {
        Ok(mut node) => {
            // Beside the pods already on the node, as a resize's allocation counts them.
            node.used = crate::pod::allocation::node_usage(&sd.other_pods());
            if let Err(r) = crate::pod::admit::check_on_node(&adm.pod, &node) {
                return admission::reject(adm.pod, &node, &r, sd);
            }
            admission::bind(&mut adm, &node);
        }
        Err(e) => {
            let code = fail(e);
            let _ = sd.finish(false, pid1_mode());
            return code;
        }
    }
    let mut sandbox = Sandbox {
        cgroup: pod_cgroup::PodCgroup::default(),
        sd: Some(sd),
        exiting: None,
        puller: None,
        userns: None,
    };
    let key = format!(
        "{}/{}",
        adm.pod.metadata.namespace.as_deref().unwrap_or("default"),
        adm.pod.metadata.name.as_deref().unwrap_or_default()
    );
    let code = sandbox.launch(adm, opts).unwrap_or_else(fail);
    let code = sandbox.clean_up(code);
    // The last word of a pod that ran, after the line per event.
    let phase = match code {
        0 => Some("Succeeded"),
        1 => Some("Failed"),
        _ => None,
    };
    if let Some(phase) = phase.filter(|_| !crate::log::quiet()) {
        crate::log::info(&format!("pod {key} {phase}"));
    }
    code
}

/// With the systemd driver `--cgroup-parent` names a slice, as kubelet's and containerd's
/// cgroup parents do under it.
fn check_cgroup_parent(opts: &RunOptions) -> Result<(), Error> {
    match (&opts.cgroup_parent, opts.cgroup_driver) {
        (Some(p), CgroupDriver::Systemd) => crate::cgroup::systemd::expand_slice(p)
            .map(drop)
            .map_err(|e| {
                Error::Options(format!("--cgroup-parent {p:?}: with --cgroup-driver systemd it names a slice (such as kubepods-burstable.slice): {e}"))
            }),
        _ => Ok(()),
    }
}

/// What the outer process created, removed by `clean_up` whatever happened.
struct Sandbox {
    cgroup: pod_cgroup::PodCgroup,
    sd: Option<StateDir>,
    /// The supervisor said it is done and is exiting: waited for after the first removal.
    exiting: Option<crate::sys::clone::Cloned>,
    /// The image puller (`puller`), when a container's image is not a bundle.
    puller: Option<crate::sys::clone::Cloned>,
    /// The block of host ids of a pod with `hostUsers: false`, given back at the end.
    userns: Option<crate::sandbox::userns::Block>,
}

/// PID-1 mode (docs/interface.md §2): a runtime made the sandbox and runs `podinit run` as its
/// process. No namespaces, no outer process: podinit moves itself to `<cgroup>/supervisor`
/// and builds the pod's tree beside it, at `<cgroup>/podinit_<ns>_<name>`, so that the pod
/// tree can be removed whole at the end while podinit itself is still running.
pub fn pid1_mode() -> bool {
    nix::unistd::getpid().as_raw() == 1
}

impl Sandbox {
    /// The pod cgroup, the supervisor's configuration, then the supervisor in the pod's
    /// namespaces (in place in PID-1 mode), relayed to until its end: its exit status.
    fn launch(&mut self, adm: Admission, opts: &RunOptions) -> Result<i32, Error> {
        let sd = self.sd.as_ref().expect("state dir is open");
        let pid1 = pid1_mode();
        // Without root the whole pod is in the user's own namespace already: not the host's
        // users, which is what `hostUsers: false` asks (docs/interface.md §Without root).
        let user_ns = adm.pod.spec.as_ref().and_then(|s| s.host_users) == Some(false)
            && !crate::sys::rootless::rootless();
        if let Some(why) = user_ns.then(|| userns::refusal(opts, pid1)).flatten() {
            return Err(Error::Refused(why));
        }
        let made = match opts.cgroup_driver {
            CgroupDriver::Cgroupfs => {
                self.cgroup
                    .create(&adm.pod, opts.cgroup_parent.as_deref(), pid1)?
            }
            CgroupDriver::Systemd => {
                self.cgroup
                    .create_slice(&adm.pod, opts.cgroup_parent.as_deref(), pid1)?
            }
        };
        // Forked before the sandbox's namespaces exist: it pulls from where podinit runs.
        // Only a pod that may pull has one: a pod on bundles and images of the store starts
        // as fast as one on bundles alone.
        let may_pull = adm.containers.iter().any(|(_, _, b)| b.may_pull())
            || adm.image_volumes.iter().any(|v| v.may_pull);
        let puller = if may_pull {
            let (child, fd) = puller::spawn(puller::Setup {
                images: opts.dir_paths().images,
                ca_files: opts.registry_ca.clone(),
                insecure: opts.insecure_registries.clone(),
                logins: puller::Logins::of(&adm.pod, &adm.secrets),
            })?;
            self.puller = Some(child);
            Some(fd)
        } else {
            None
        };
        let mut cfg =
            config::supervisor_config(adm, opts, &made, &mut self.cgroup, sd, pid1, puller)?;
        if user_ns {
            cfg.userns = Some(userns::make(&cfg, sd, &mut self.userns)?);
        }
        if pid1 {
            return Ok(supervise::supervise(cfg, sd, true, false));
        }
        let relayed = relay::block_signals();
        let placement = self.cgroup.supervisor_placement()?;
        let sup = namespaces::clone_supervisor(cfg, sd, opts, &placement)?;
        let end = relay::until_end(&sup.child, &relayed, &sup.done);
        drop(sup.alive);
        Ok(match end {
            End::Announced(code) => {
                self.exiting = Some(sup.child);
                code
            }
            End::Exited(code) => code,
            End::Lost(code) => {
                if let Err(e) = lost::write_final_status(&sd.status_file()) {
                    crate::log::error(&format!("writing the pod's final status: {e}"));
                }
                code
            }
        })
    }
}
