//! The supervisor: PID 1 of the pod, one thread, one poll loop.

pub mod signals;
