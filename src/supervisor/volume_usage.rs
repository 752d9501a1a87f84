//! Disk emptyDirs with a `sizeLimit`: their usage measured on a timer, as kubelet's
//! eviction manager does, and the pod evicted when one exceeds its limit
//! (`pod::empty_dir::eviction`). The measuring is incremental, a bounded number of
//! directory entries per turn of the loop.

use std::path::PathBuf;

use super::Supervisor;
use crate::pod;
use crate::sandbox::volumes::DiskUsage;

/// kubelet's eviction manager's monitoring interval.
const PERIOD_MS: pod::Millis = 10_000;
/// Directory entries counted per turn of the loop.
const BUDGET: usize = 4096;

/// A disk emptyDir with a size limit.
struct Limited {
    name: String,
    dir: PathBuf,
    limit_bytes: i128,
    /// As written in the manifest, for the message.
    limit: String,
}

#[derive(Default)]
pub(super) struct Watch {
    vols: Vec<Limited>,
    /// The volume being measured and its walk so far.
    walking: Option<(usize, DiskUsage)>,
    next_at: pod::Millis,
}

impl Watch {
    /// The disk emptyDirs of the pod that have a `sizeLimit`, at their host paths.
    pub fn of(
        spec: &k8s_openapi::api::core::v1::PodSpec,
        volumes: &std::collections::BTreeMap<String, crate::bundle::HostVolume>,
    ) -> Watch {
        let vols = spec
            .volumes
            .iter()
            .flatten()
            .filter_map(|v| {
                let ed = v.empty_dir.as_ref()?;
                if !ed.medium.as_deref().unwrap_or("").is_empty() {
                    return None;
                }
                let limit_bytes = pod::empty_dir::size_limit(ed).filter(|l| *l > 0)?;
                Some(Limited {
                    name: v.name.clone(),
                    dir: volumes.get(&v.name)?.host_path.clone(),
                    limit_bytes,
                    limit: ed.size_limit.as_ref()?.0.clone(),
                })
            })
            .collect();
        Watch {
            vols,
            walking: None,
            next_at: PERIOD_MS,
        }
    }
}

impl Supervisor<'_> {
    /// Measure a little more if a measurement is due; evict the pod when a volume is over
    /// its limit. Keeps a wake-up for the next piece of work.
    pub(super) fn watch_volume_usage(&mut self) {
        if self.volume_usage.vols.is_empty() || self.st.terminating.is_some() {
            return;
        }
        let now = self.now();
        let w = &mut self.volume_usage;
        if now < w.next_at {
            self.wake.insert(w.next_at);
            return;
        }
        let (i, du) = w
            .walking
            .get_or_insert_with(|| (0, DiskUsage::new(&w.vols[0].dir)));
        let Some(used) = du.step(BUDGET) else {
            // More to count: the next turn goes on without waiting.
            self.wake.insert(now);
            return;
        };
        let v = &w.vols[*i];
        let evicted = pod::empty_dir::eviction(&v.name, used, v.limit_bytes, &v.limit);
        let next = *i + 1;
        if next < w.vols.len() {
            w.walking = Some((next, DiskUsage::new(&w.vols[next].dir)));
            self.wake.insert(now);
        } else {
            w.walking = None;
            w.next_at = now + PERIOD_MS;
            self.wake.insert(w.next_at);
        }
        if let Some(msg) = evicted {
            self.st.evict(&self.cfg.plan, &msg, now);
            self.wake.insert(now);
        }
    }
}
