//! podinit: one Kubernetes pod on bare Linux, supervised by PID 1 of its sandbox.
//!
//! Data flows one way: manifest → admission → pod plan → supervisor loop → runtime
//! (kernel) → observations → status. `pod` holds every decision as pure code; `runtime`,
//! `sandbox` and `supervisor` are the thin layer that touches the kernel, standing on the
//! cgroup floor (`cgroup`) and the primitives of `sys`. The layer rules are in
//! docs/architecture.md §1, checked by `layers.rs`.

pub mod admission;
pub mod api;
pub mod bundle;
pub mod cgroup;
pub mod cli;
pub mod error;
pub mod image;
#[cfg(test)]
mod layers;
pub mod log;
pub mod logs;
pub mod manifest;
pub mod pod;
pub mod probe;
pub mod quantity;
pub mod run;
pub mod runc;
pub mod runtime;
pub mod sandbox;
pub mod spec;
pub mod status;
pub mod supervisor;
pub mod sys;
pub mod tracked;
pub mod util;
