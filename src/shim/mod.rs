//! containerd's shim v2 for podinit (docs/cri.md). One shim serves a whole pod: the
//! sandbox task and every container whose `io.kubernetes.cri.sandbox-id` names it. The
//! sandbox's PID 1 is podinit's pause; each container is made by podinit's runc
//! front-end; the shim is their subreaper, so exits and OOM kills are its own to report.
//! The protocol (ttrpc, the `start`/`delete` subcommands, events) is the
//! rust-extensions `containerd-shim` crate's.

pub mod boot;
mod bootstrap;
mod container;
mod error;
mod events;
mod exec;
mod exits;
mod init;
mod metrics;
mod orphan;
mod pack;
mod paths;
mod pod_left;
mod process;
mod reaper;
mod rootfs;
mod runc;
mod sandbox;
pub mod sandboxer;
mod say;
mod server;
mod service;
mod stdio;
mod task_api;
mod tasks;

use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};

use containerd_shim::publisher::RemotePublisher;
use containerd_shim::{Config, DeleteResponse, ExitSignal, Flags, StartOpts};

/// runc's `--root` for a namespace, under the state directory of the containerd whose
/// bundle is the shim's working directory (`paths.rs`).
fn runc_root(namespace: &str) -> PathBuf {
    let bundle = std::env::current_dir().unwrap_or_default();
    paths::runc_root(&bundle, namespace)
}

pub struct Shim {
    namespace: String,
    id: String,
    exit: Arc<ExitSignal>,
}

/// The options the shim runs with: it reaps its children itself (`reaper.rs`). Also one
/// malloc arena for all its threads: each ttrpc worker would otherwise grow an arena of
/// its own, most of the shim's memory for nothing (its calls are few and short).
pub fn config() -> Config {
    podinit::sys::proc::one_malloc_arena();
    Config {
        no_reaper: true,
        ..Default::default()
    }
}

fn shim_err(e: String) -> containerd_shim::Error {
    containerd_shim::Error::Other(e)
}

impl containerd_shim::Shim for Shim {
    type T = service::Service;

    fn new(_runtime_id: &str, args: &Flags, _config: &mut Config) -> Self {
        Shim {
            namespace: args.namespace.clone(),
            id: args.id.clone(),
            exit: Arc::new(ExitSignal::default()),
        }
    }

    /// The address of the pod's shim: started unless it already runs (`boot` runs
    /// `start` itself; this serves the crate's trait).
    fn start_shim(&mut self, opts: StartOpts) -> containerd_shim::Result<String> {
        boot::start_address(&opts.id, &opts.namespace, &opts.address, opts.debug, None)
            .map_err(|e| shim_err(e.to_string()))
    }

    /// After the shim is gone: remove what is left of the task (its processes, cgroup,
    /// state and rootfs mount), and report it killed.
    fn delete_shim(&mut self) -> containerd_shim::Result<DeleteResponse> {
        let bundle = std::env::current_dir().map_err(|e| shim_err(format!("bundle: {e}")))?;
        // A Sandbox API sandbox's PID 1 and cgroup, when the shim was a sandbox's.
        let root = runc_root(&self.namespace);
        // A Sandbox API shim still running in this bundle ends first, so that it starts
        // nothing more while its sandbox is cleaned up.
        if !bundle.join("config.json").exists() {
            orphan::end_running_shim(&bundle, &self.id);
        }
        let sandbox_pid = sandboxer::cleanup(&bundle, &root, &self.id);
        let args = [
            "--root",
            &root.to_string_lossy(),
            "delete",
            "--force",
            &self.id,
        ]
        .map(std::ffi::OsString::from)
        .to_vec();
        let _ = podinit::runc::main(args);
        let _ = nix::mount::umount2(&bundle.join("rootfs"), nix::mount::MntFlags::MNT_DETACH);
        // The pod's other containers, whose shim this was, when this is its sandbox.
        pod_left::end_containers_of(&root, &self.id);
        let pid = std::fs::read_to_string(bundle.join("init.pid"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .or(sandbox_pid.map(|p| p as u32))
            .unwrap_or(0);
        Ok(DeleteResponse {
            pid,
            exit_status: 128 + libc::SIGKILL as u32,
            exited_at: containerd_shim::protos::protobuf::MessageField::some(tasks::timestamp(
                std::time::SystemTime::now(),
            )),
            ..Default::default()
        })
    }

    fn wait(&mut self) {
        self.exit.wait();
    }

    /// The crate's connection to containerd's events is not used: the shim publishes
    /// through a connection of its own, made when there is an event (`events.rs`).
    fn create_task_service(&self, publisher: RemotePublisher) -> Self::T {
        drop(publisher);
        self.task_service()
    }
}

impl Shim {
    /// The Task service, with the reaper and event publisher threads it needs.
    pub fn task_service(&self) -> service::Service {
        let root = runc_root(&self.namespace);
        if let Err(e) = std::fs::create_dir_all(&root) {
            say::warn(format_args!("creating {}: {e}", root.display()));
        }
        let reaper = Arc::new(reaper::Reaper::default());
        let (tx, rx) = mpsc::channel();
        events::publisher_thread(rx, self.namespace.clone());
        let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("/proc/self/exe"));
        let runc = match runc::Runc::new(root, Arc::clone(&reaper)) {
            Ok(r) => r,
            Err(e) => {
                say::warn(format_args!("{e}"));
                std::process::exit(1);
            }
        };
        let inner = Arc::new(service::Inner::new(
            runc,
            reaper,
            tx,
            Arc::clone(&self.exit),
            exe,
        ));
        reaper_thread(Arc::clone(&inner));
        service::Service(inner)
    }
}

/// Whether a shim already listens at `address` (`unix://<state>/s/…`).
fn serves(address: &str) -> bool {
    std::os::unix::net::UnixStream::connect(socket_path(address)).is_ok()
}

/// The file of a shim's socket address (`unix://` and a path, or the bare path).
fn socket_path(address: &str) -> &Path {
    Path::new(address.strip_prefix("unix://").unwrap_or(address))
}

/// Reaps on every SIGCHLD and hands the exits to the task table.
fn reaper_thread(inner: Arc<service::Inner>) {
    let mut signals = match signal_hook::iterator::Signals::new([libc::SIGCHLD]) {
        Ok(s) => s,
        Err(e) => {
            say::warn(format_args!("SIGCHLD: {e}"));
            std::process::exit(1);
        }
    };
    std::thread::spawn(move || {
        // Children that ended before the handler was in place.
        inner.on_exits(&inner.reaper.reap());
        for _ in signals.forever() {
            let exits = inner.reaper.reap();
            inner.on_exits(&exits);
        }
    });
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_live_shim_is_found_by_its_url() {
        let dir = std::env::temp_dir().join(format!("podinit-shim-serves-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.sock");
        let url = format!("unix://{}", path.display());
        assert!(!super::serves(&url), "nothing listens yet");
        let l = std::os::unix::net::UnixListener::bind(&path).unwrap();
        assert!(super::serves(&url), "a listening socket, named by its URL");
        drop(l);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
