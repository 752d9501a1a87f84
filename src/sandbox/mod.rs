//! The pod sandbox: cgroup tree, namespaces, state directory, container root filesystems
//! and volumes. Everything here touches the kernel; the decisions live in `pod`.

pub mod cgroup;
pub mod etc_files;
pub mod net;
pub mod pause;
pub mod rootfs;
pub mod statedir;
pub mod sysctls;
pub mod userns;
pub mod volumes;

// Device rules are data the bundle uses too: they live in `sys`.
