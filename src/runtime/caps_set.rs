//! The container's five capability sets, parsed in the supervisor and applied in the child
//! with the `caps` crate: the bounding set is narrowed while still root, the others are
//! set after the uid change (PR_SET_KEEPCAPS keeps the permitted set across it).

use caps::{CapSet, Capability, CapsHashSet};

use super::{Error, Result};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Caps {
    pub bounding: CapsHashSet,
    pub effective: CapsHashSet,
    pub permitted: CapsHashSet,
    pub inheritable: CapsHashSet,
    pub ambient: CapsHashSet,
}

fn parse(names: &Option<oci_spec::runtime::Capabilities>) -> Result<CapsHashSet> {
    let mut out = CapsHashSet::new();
    for c in names.iter().flatten() {
        // oci-spec prints its enum without the prefix (`CHOWN`); caps wants `CAP_CHOWN`.
        let name = format!("CAP_{}", c.to_string().trim_start_matches("CAP_"));
        let cap: Capability = name
            .parse()
            .map_err(|_| Error::Spec(format!("capability {name} is not known to this system")))?;
        out.insert(cap);
    }
    Ok(out)
}

impl Caps {
    pub fn from_spec(c: Option<&oci_spec::runtime::LinuxCapabilities>) -> Result<Caps> {
        let Some(c) = c else {
            return Ok(Caps::default());
        };
        Ok(Caps {
            bounding: parse(c.bounding())?,
            effective: parse(c.effective())?,
            permitted: parse(c.permitted())?,
            inheritable: parse(c.inheritable())?,
            ambient: parse(c.ambient())?,
        })
    }

    /// Drop from the bounding set every capability not in it (needs CAP_SETPCAP: call
    /// before leaving root).
    pub fn apply_bounding(&self) -> Result<()> {
        for cap in caps::all() {
            if !self.bounding.contains(&cap) {
                // A capability this kernel does not know cannot be dropped: skip it.
                if let Err(e) = caps::drop(None, CapSet::Bounding, cap) {
                    if caps::has_cap(None, CapSet::Bounding, cap).unwrap_or(false) {
                        return Err(Error::Setup(format!(
                            "dropping {cap} from the bounding set: {e}"
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    /// Set the effective, permitted, inheritable and ambient sets exactly.
    pub fn apply_rest(&self) -> Result<()> {
        let ctx = |set: &str, e: caps::errors::CapsError| {
            Error::Setup(format!("setting the {set} capabilities: {e}"))
        };
        // Each set is bounded by the current permitted set: effective and inheritable are
        // set while the permitted set is still root's, then permitted is narrowed (it keeps
        // the effective ones), then ambient (which needs permitted and inheritable).
        caps::set(None, CapSet::Effective, &self.effective).map_err(|e| ctx("effective", e))?;
        caps::set(None, CapSet::Inheritable, &self.inheritable)
            .map_err(|e| ctx("inheritable", e))?;
        let mut permitted = self.permitted.clone();
        permitted.extend(self.effective.iter().copied());
        caps::set(None, CapSet::Permitted, &permitted).map_err(|e| ctx("permitted", e))?;
        caps::clear(None, CapSet::Ambient).map_err(|e| ctx("ambient", e))?;
        // The kernel raises an ambient capability only if it is permitted and inheritable;
        // runc skips the others (with a warning), and so does podinit: a spec made by
        // `runc spec` lists ambient capabilities but no inheritable ones.
        for cap in self
            .ambient
            .iter()
            .filter(|c| permitted.contains(c) && self.inheritable.contains(c))
        {
            caps::raise(None, CapSet::Ambient, *cap).map_err(|e| ctx("ambient", e))?;
        }
        Ok(())
    }
}
