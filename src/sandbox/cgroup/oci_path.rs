//! Where an OCI bundle's `linux.cgroupsPath` puts a container, as runc's cgroupfs driver
//! reads it: an absolute path from the root of each hierarchy (the caller names it), a
//! relative one below the cgroup the runtime was started in, none: `<id>` below that.

use std::io;

use super::{CgroupRoot, Group};

impl CgroupRoot {
    /// The container's group for `cgroups_path` (not created yet: `Group::create_all`).
    pub fn for_oci_path(cgroups_path: Option<&str>, id: &str) -> io::Result<Group> {
        let _ = (cgroups_path, id);
        Err(io::Error::other(
            "CgroupRoot::for_oci_path is not built yet",
        ))
    }
}

impl Group {
    /// Create the cgroup and every missing ancestor in every hierarchy (runc makes the
    /// whole path).
    pub fn create_all(&self) -> io::Result<()> {
        Err(io::Error::other("Group::create_all is not built yet"))
    }
}
