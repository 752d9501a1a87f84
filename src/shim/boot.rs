//! How the shim comes up: `start` binds the pod's socket itself and hands it to the daemon
//! it spawns, then answers containerd at once, as containerd's Go shims do; the daemon
//! serves on the socket it was given. The shim crate's `start` instead waits until its
//! daemon has bound the socket and set up its ttrpc client and server, while containerd's
//! own work after `start` could overlap them (the cost is in BENCHMARKS.md).
//! `delete` is answered here too, without the crate's signal thread; `-v` and the rest
//! stay the crate's.

use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixListener;
use std::process::{Command, Stdio};
use std::sync::Arc;

use containerd_shim::Shim as _;

use super::error::Error;
use super::Shim;

pub const RUNTIME_ID: &str = "io.containerd.podinit.v1";

/// The fd on which the daemon tells `start` that it serves the socket (a pipe's write
/// end), and the variable that says so.
const READY_FD: RawFd = 3;
const READY_ENV: &str = "PODINIT_SHIM_READY";

/// The shim's entry point (after `pause` and `runc`, which are the binary's other parts).
pub fn main() -> ! {
    let config = super::config();
    let args: Vec<_> = std::env::args_os().collect();
    let flags = match containerd_shim::parse(&args[1..]) {
        Ok(f) => f,
        Err(_) => crate_run(config),
    };
    if flags.info {
        // containerd 2's CRI asks for the handler's features (rro, user namespaces).
        let info = super::bootstrap::runtime_info(
            RUNTIME_ID,
            env!("CARGO_PKG_VERSION"),
            &podinit::runc::features::document(),
        );
        let mut out = std::io::stdout();
        if let Err(e) = std::io::Write::write_all(&mut out, &info)
            .and_then(|()| std::io::Write::flush(&mut out))
        {
            eprintln!("{RUNTIME_ID}: answering -info on stdout: {e}");
            std::process::exit(1);
        }
        std::process::exit(0)
    }
    let ours = !flags.version && !flags.namespace.is_empty();
    let result = match flags.action.as_str() {
        "start" if ours => start(&flags),
        "delete" if ours => delete(&flags, config),
        "" if ours && !flags.socket.is_empty() => daemon(&flags, config),
        _ => crate_run(config),
    };
    if let Err(e) = result {
        eprintln!("{RUNTIME_ID}: {e}");
        std::process::exit(1);
    }
    std::process::exit(0)
}

fn crate_run(config: containerd_shim::Config) -> ! {
    containerd_shim::run::<Shim>(RUNTIME_ID, Some(config));
    std::process::exit(0)
}

/// `start`: the address of the pod's shim on stdout, in the form the containerd that asks
/// reads (`bootstrap.rs`).
fn start(flags: &containerd_shim::Flags) -> Result<(), Error> {
    let mut input = Vec::new();
    // containerd writes its bootstrap (or the runtime options) and closes; a terminal is
    // a person, who writes nothing.
    if !std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut input)
            .map_err(|e| Error::io("reading containerd's bootstrap on stdin", e))?;
    }
    if let Some((url, value)) = super::bootstrap::options(&input) {
        let refused = super::bootstrap::refused_runc_options(&url, &value);
        if !refused.is_empty() {
            return Err(Error::Unsupported(format!(
                "the podinit handler does not support the runtime options {} (docs/cri.md \
                 §4): remove them from its options in containerd's config",
                refused.join(", ")
            )));
        }
        let bundle = std::env::current_dir().map_err(|e| Error::io("bundle", e))?;
        super::bootstrap::keep_systemd_cgroup(
            &bundle,
            super::bootstrap::systemd_cgroup(&url, &value),
        )?;
    }
    let boot = super::bootstrap::parse(&input, &flags.namespace);
    let socket_dir = boot.as_ref().and_then(|b| b.socket_dir.as_deref());
    let address = start_address(
        &flags.id,
        &flags.namespace,
        &flags.address,
        flags.debug,
        socket_dir,
    )?;
    let answer = match boot {
        Some(_) => super::bootstrap::result(&address),
        None => address.into_bytes(),
    };
    let mut out = std::io::stdout();
    std::io::Write::write_all(&mut out, &answer)
        .and_then(|()| std::io::Write::flush(&mut out))
        .map_err(|e| Error::io("answering containerd on stdout", e))
}

/// The address of the pod's shim, started unless it already runs, also written to the
/// bundle's `address` file (as the crate's `start` does). Its socket is in `socket_dir`
/// when containerd names one, else under containerd's state directory (`paths.rs`).
pub fn start_address(
    id: &str,
    namespace: &str,
    containerd: &str,
    debug: bool,
    socket_dir: Option<&str>,
) -> Result<String, Error> {
    let bundle = std::env::current_dir().map_err(|e| Error::io("bundle", e))?;
    // A Sandbox API sandbox's bundle has no config.json: its shim is its own.
    let grouping = if bundle.join("config.json").exists() {
        super::sandbox::grouping_in(id, &bundle)?
    } else {
        id.to_string()
    };
    let address =
        super::paths::socket_address(&bundle, socket_dir, containerd, namespace, &grouping);
    if !super::serves(&address) {
        spawn_daemon([namespace, id, containerd, &address], debug)?;
    }
    containerd_shim::util::write_address(&address).map_err(|e| {
        Error::Other(format!(
            "writing the address file in {}: {e}",
            bundle.display()
        ))
    })?;
    Ok(address)
}

/// The pod's socket, bound and listening; `None` when a shim already serves it (this is
/// a container of a pod whose shim runs, or another `start` has just bound it).
fn bind(address: &str) -> Result<Option<UnixListener>, Error> {
    let path = super::socket_path(address);
    if super::serves(address) {
        return Ok(None);
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(format_args!("creating {}", dir.display()), e))?;
    }
    match UnixListener::bind(path) {
        Ok(l) => Ok(Some(l)),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            if super::serves(address) {
                return Ok(None);
            }
            // Left by a shim that was killed: nobody listens on it.
            let _ = std::fs::remove_file(path);
            UnixListener::bind(path)
                .map(Some)
                .map_err(|e| Error::io(format_args!("binding {}", path.display()), e))
        }
        Err(e) => Err(Error::io(format_args!("binding {}", path.display()), e)),
    }
}

/// The daemon: this binary again, with the crate's daemon arguments. It binds the socket
/// itself, so that a `start` killed before the daemon exists (containerd kills it when
/// its call's context ends) leaves no socket behind; `start` waits until the daemon says
/// on a pipe (fd 3) that the socket listens, or that another daemon of the pod serves it.
/// containerd's calls then queue on the socket while the daemon comes up.
fn spawn_daemon([namespace, id, containerd, address]: [&str; 4], debug: bool) -> Result<(), Error> {
    let exe = std::env::current_exe().map_err(|e| Error::io("finding the shim's binary", e))?;
    let (ready_r, ready_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
        .map_err(|e| Error::io("a pipe to the shim's daemon", std::io::Error::from(e)))?;
    let mut cmd = Command::new(&exe);
    cmd.args(["-namespace", namespace, "-id", id])
        .args(["-address", containerd, "-socket", address])
        .args(debug.then_some("-debug"))
        .env(READY_ENV, READY_FD.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    podinit::sys::fd::pass_as(&mut cmd, ready_w.as_raw_fd(), READY_FD);
    let spawned = cmd.spawn();
    drop(ready_w);
    spawned.map_err(|e| {
        Error::io(
            format_args!("starting the shim's daemon {}", exe.display()),
            e,
        )
    })?;
    let mut said = String::new();
    std::io::Read::read_to_string(&mut std::fs::File::from(ready_r), &mut said)
        .map_err(|e| Error::io("reading the shim's daemon's answer", e))?;
    match said.trim() {
        READY | SERVED => Ok(()),
        "" => Err(Error::Other(format!(
            "the shim's daemon ended before it served {address}"
        ))),
        why => Err(Error::Other(format!("the shim's daemon: {why}"))),
    }
}

/// What the daemon tells `start`: it listens on the socket, or another daemon serves it.
const READY: &str = "ready";
const SERVED: &str = "served";

/// Tells `start` (when it waits on `ready`) what became of the socket; the pipe closes.
fn tell(ready: &mut Option<std::fs::File>, what: &str) {
    if let Some(mut f) = ready.take() {
        let _ = std::io::Write::write_all(&mut f, what.as_bytes());
    }
}

/// What the crate sets up before any action: containerd's SIGTERM and SIGINT, and
/// SIGPIPE, do not end the shim (its task's Shutdown does), and the shim is a subreaper.
/// Handlers, not SIG_IGN, so that nothing exec'd inherits them; and no thread to watch
/// them, which the crate starts.
fn as_the_crate_sets_up() -> Result<(), Error> {
    let ignored = Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGPIPE] {
        signal_hook::flag::register(sig, Arc::clone(&ignored))
            .map_err(|e| Error::io(format_args!("signal {sig}"), e))?;
    }
    nix::sys::prctl::set_child_subreaper(true)
        .map_err(|e| Error::io("becoming a subreaper", std::io::Error::from(e)))
}

/// `delete`, which containerd runs in a task's bundle once its shim has gone: on the path
/// of every StopPodSandbox (the sandbox's) and container removal. The crate's, less the
/// thread it starts to watch signals: `Shim::delete_shim` cleans up, and its
/// DeleteResponse goes to stdout.
fn delete(
    flags: &containerd_shim::Flags,
    mut config: containerd_shim::Config,
) -> Result<(), Error> {
    as_the_crate_sets_up()?;
    let mut shim = Shim::new(RUNTIME_ID, flags, &mut config);
    let response = shim
        .delete_shim()
        .map_err(|e| Error::Other(format!("deleting task {}: {e}", flags.id)))?;
    let bytes = containerd_shim::protos::protobuf::Message::write_to_bytes(&response)
        .map_err(|e| Error::Other(format!("encoding the delete answer: {e}")))?;
    let mut out = std::io::stdout();
    std::io::Write::write_all(&mut out, &bytes)
        .and_then(|()| std::io::Write::flush(&mut out))
        .map_err(|e| Error::io("answering containerd on stdout", e))
}

/// The daemon: the crate's, serving the socket `start` bound (or binding it itself when
/// run without one).
fn daemon(
    flags: &containerd_shim::Flags,
    mut config: containerd_shim::Config,
) -> Result<(), Error> {
    // Where events go; connected to at the first event (`events.rs`).
    std::env::var("TTRPC_ADDRESS").map_err(|e| Error::Missing(format!("TTRPC_ADDRESS: {e}")))?;
    // `start`'s pipe, when it waits for the socket (a daemon run by hand has none).
    let mut ready = match std::env::var(READY_ENV) {
        Ok(_) => {
            let fd = podinit::sys::fd::take_inherited(READY_FD)
                .map_err(|e| Error::io("the pipe from start", e))?;
            // Inherited without close-on-exec: no verb or container may hold it open too.
            nix::fcntl::fcntl(
                &fd,
                nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
            )
            .map_err(|e| Error::Other(format!("the pipe from start: {e}")))?;
            Some(std::fs::File::from(fd))
        }
        Err(_) => None,
    };
    std::env::remove_var(READY_ENV);
    let listener = match as_the_crate_sets_up().and_then(|()| bind(&flags.socket)) {
        Ok(Some(l)) => {
            tell(&mut ready, READY);
            l
        }
        Ok(None) => {
            // Another `start` of the pod spawned its daemon first, which serves it.
            tell(&mut ready, SERVED);
            return Ok(());
        }
        Err(e) => {
            tell(&mut ready, &e.to_string());
            return Err(e);
        }
    };
    let mut shim = Shim::new(RUNTIME_ID, flags, &mut config);
    super::say::init_log(flags.debug, &config.default_log_level);
    super::say::log_panics();
    let tasks = shim.task_service();
    let peers = Arc::clone(&tasks.0.peers);
    let sandboxes = super::sandboxer::service(Arc::clone(&tasks.0));
    let task: Arc<dyn containerd_shim::Task + Send + Sync> = Arc::new(tasks);
    // The same Task service under both names: v2 for containerd 1.6 to 2.2, v3 for the
    // containerd that was answered version 3 (`bootstrap.rs`); the messages are the same.
    let create = containerd_shim::protos::shim::shim_ttrpc::create_task;
    let mut service = create(Arc::clone(&task));
    for (method, handler) in create(task) {
        let v3 = method.replacen("/containerd.task.v2.", "/containerd.task.v3.", 1);
        service.insert(v3, handler);
    }
    // containerd 2's Sandbox API on the same socket (a runtime with `sandboxer = "shim"`).
    service.extend(sandboxes);
    if let Err(e) = super::server::start(listener, service, peers) {
        // Nobody will ever serve it: a socket left would stay for good.
        let _ = std::fs::remove_file(super::socket_path(&flags.socket));
        return Err(Error::io(format_args!("serving {}", flags.socket), e));
    }
    shim.wait();
    // The socket goes with us. By its path, not the bundle's `address` file as the crate
    // does: containerd removes the bundle once Shutdown has answered, often before this
    // runs, and the socket was then left behind. The connections end with the process.
    let _ = std::fs::remove_file(super::socket_path(&flags.socket));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::bind;

    #[test]
    fn a_socket_is_bound_once_served_and_taken_back_when_left_by_a_dead_shim() {
        let dir = std::env::temp_dir().join(format!("podinit-shim-bind-{}", std::process::id()));
        let path = dir.join("s").join("pod.sock");
        let url = format!("unix://{}", path.display());
        let first = bind(&url)
            .unwrap()
            .expect("a new socket, its directory made");
        assert!(bind(&url).unwrap().is_none(), "served: the running shim's");
        drop(first);
        assert!(path.exists(), "a killed shim leaves its socket file");
        let again = bind(&url).unwrap().expect("a stale socket is replaced");
        drop(again);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
