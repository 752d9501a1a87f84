//! containerd's shim v2 for podinit (docs/cri.md): one shim per pod, podinit's pause as
//! the sandbox's PID 1, podinit's runtime making every container.
//!
//! The same binary plays four parts, by its first argument: `pause` (the sandbox's PID
//! 1, bind-mounted into the sandbox), `runc …` (podinit's runc front-end, run by the
//! shim once per verb), `sandbox-init …` (a Sandbox API sandbox's namespaces and PID 1,
//! `shim/sandboxer/start.rs`), and otherwise the shim itself.

#[path = "../shim/mod.rs"]
mod shim;

fn main() {
    let mut args = std::env::args_os();
    let _ = args.next();
    match args.next().as_deref().and_then(|a| a.to_str()) {
        Some("pause") => podinit::sys::pause::run(),
        Some("runc") => std::process::exit(podinit::runc::main(args.collect())),
        Some("sandbox-init") => shim::sandboxer::init_main(args),
        _ => shim::boot::main(),
    }
}
