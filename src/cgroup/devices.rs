//! The spec's device rules applied to a cgroup: v1's `devices.allow`/`devices.deny`, or
//! v2's BPF device program (`sys::bpf`).

use std::fs;
use std::io;

use super::{err, missing, Group};
use crate::sys::devices::Rule;

impl Group {
    /// Limit the device nodes the cgroup's processes may use to `rules` (see `devices`):
    /// v1 through `devices.deny`/`devices.allow`, v2 with a device program attached to the
    /// cgroup (once: each call adds one). No rules: no limit, as the OCI spec says.
    pub fn confine_devices(&self, rules: &[Rule]) -> super::Result<()> {
        if rules.is_empty() || self.root.is_none() {
            return Ok(());
        }
        let ctx =
            |what: &str, e: io::Error| err(&format!("{what} for cgroup {}", self.describe()), e);
        if self.v2 {
            let dir = self
                .dirs
                .first()
                .ok_or_else(|| missing("devices", "no cgroup directory"))?;
            return match crate::sys::bpf::attach_device_program(
                dir,
                &crate::sys::bpf::program(rules),
            ) {
                // Loading a device program needs CAP_BPF over the host: without root the
                // rules are ignored, as runc's fs2 manager ignores them when rootless (the
                // user namespace cannot make device nodes, only bind the host's).
                Err(_) if crate::sys::rootless::rootless() => Ok(()),
                r => r.map_err(|e| ctx("attaching the device program", e)),
            };
        }
        let Some(dir) = &self.devices else {
            return Err(missing(
                "devices",
                format!("no devices controller for cgroup {}", self.describe()),
            ));
        };
        // One rule per write(2), as the kernel parses them, through one open file each.
        let mut files: [Option<fs::File>; 2] = [None, None];
        for r in rules {
            let file = if r.allow {
                "devices.allow"
            } else {
                "devices.deny"
            };
            let f = match &mut files[r.allow as usize] {
                Some(f) => f,
                slot => slot.insert(
                    fs::OpenOptions::new()
                        .write(true)
                        .open(dir.join(file))
                        .map_err(|e| ctx(&format!("opening {file}"), e))?,
                ),
            };
            match io::Write::write_all(f, r.v1_line().as_bytes()) {
                Ok(()) => {}
                // The parent cgroup does not allow it: it stays denied, which is stricter.
                Err(e) if r.allow && e.raw_os_error() == Some(libc::EPERM) => {}
                Err(e) => return Err(ctx(&format!("writing {:?} to {file}", r.v1_line()), e)),
            }
        }
        Ok(())
    }
}
