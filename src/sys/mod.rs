//! Kernel primitives that `runtime` and `sandbox` both stand on, one module a job: they
//! know processes, mounts, cgroups and signals, and nothing of pods or manifests.

pub mod beneath;
pub mod bpf;
pub mod cgroup;
pub mod child_heap;
pub mod clone;
pub mod devices;
mod error;
pub mod exe;
pub mod fd;
pub mod fs;
pub mod idmap;
pub mod mount;
pub mod net;
pub mod packet;
pub mod pages;
pub mod pause;
pub mod pidfd;
pub mod proc;
pub mod procfs;
pub mod pty;
pub mod rootless;
pub mod signal_pipe;
pub mod signals;
pub mod spawn;
pub mod unix_socket;
pub mod wait;

pub use error::{Error, Result};
