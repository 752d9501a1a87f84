//! The daemon's own diagnostics. Its stderr is /dev/null once `start` has detached it, so
//! what it has to say goes to containerd's log through the bundle's `log` fifo (the
//! crate's logger), where containerd prints it with the shim's id.

use std::os::unix::fs::OpenOptionsExt;

/// The crate's logger on the bundle's `log` fifo, at the crate's level (`RUST_LOG`, else
/// `default_level`; debug with `-debug`). The fifo is opened without blocking: when
/// nobody reads it (containerd gave up on this shim while it came up, and is gone) or it
/// is gone (containerd removed the bundle), the shim runs without its log rather than
/// block in the open for ever or end with its socket left behind, and then ends itself
/// as a shim containerd dropped does (`orphan.rs`).
pub fn init_log(debug: bool, default_level: &str) {
    let opened = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open("log")
        .and_then(|f| {
            // Blocking from now on, as the crate's logger writes.
            nix::fcntl::fcntl(
                &f,
                nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::empty()),
            )
            .map_err(std::io::Error::from)?;
            Ok(f)
        });
    let file = match opened {
        Ok(f) => f,
        Err(e) => {
            eprintln!("containerd-shim-podinit-v1: the bundle's log fifo: {e}: running without it");
            return;
        }
    };
    let level = std::env::var(containerd_shim::logger::LOG_ENV)
        .ok()
        .and_then(|l| l.parse().ok())
        .unwrap_or_else(|| default_level.parse().unwrap_or(log::LevelFilter::Info));
    log::set_max_level(if debug {
        level.max(log::LevelFilter::Debug)
    } else {
        level
    });
    let logger = containerd_shim::logger::FifoLogger::with_file(file);
    if let Err(e) = log::set_boxed_logger(Box::new(logger)) {
        eprintln!("containerd-shim-podinit-v1: the shim's log: {e}");
    }
}

/// A line for containerd's log, as a warning; also on stderr, which is containerd's for
/// the `start` and `delete` verbs.
pub fn warn(msg: std::fmt::Arguments) {
    log::warn!("{msg}");
    eprintln!("containerd-shim-podinit-v1: {msg}");
}

/// A panic in any of the daemon's threads is logged before it ends that thread (or, built
/// with `panic = "abort"`, the shim): without this, containerd sees only `ttrpc: closed`.
pub fn log_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        log::error!("panic: {info}");
        default(info);
    }));
}
