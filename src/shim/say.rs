//! The daemon's own diagnostics. Its stderr is /dev/null once `start` has detached it, so
//! what it has to say goes to containerd's log through the bundle's `log` fifo (the
//! crate's logger), where containerd prints it with the shim's id.

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
