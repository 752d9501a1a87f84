//! The pod's sandbox: its state directory, container root filesystems, volumes, /etc
//! files, sysctls and user namespace. Everything here touches the kernel for a pod; the
//! decisions live in `pod`, the cgroups in `cgroup`.

mod error;
pub mod etc_files;
pub mod image_volume;
pub mod ownership;
pub mod rootfs;
pub mod statedir;
pub mod sysctls;
pub mod userns;
pub mod volumes;

pub use error::Error;

// Device rules are data the bundle uses too: they live in `sys`.
