//! `status.json`: the Pod object, replaced atomically whenever it changes.

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use std::io;
use std::path::PathBuf;

pub struct StatusWriter {
    path: PathBuf,
    pod: Pod,
    last: Vec<u8>,
}

impl StatusWriter {
    /// `pod`: the effective Pod (metadata and spec); its status is replaced on each update.
    pub fn new(path: PathBuf, mut pod: Pod) -> StatusWriter {
        pod.status = None;
        StatusWriter {
            path,
            pod,
            last: Vec::new(),
        }
    }

    /// The Pod object with `status`, as JSON.
    pub fn object(&self, status: &PodStatus) -> Vec<u8> {
        let mut pod = self.pod.clone();
        pod.status = Some(status.clone());
        let mut v = serde_json::to_vec_pretty(&pod).unwrap_or_default();
        v.push(b'\n');
        v
    }

    /// Write the file if the object changed; returns whether it did.
    pub fn update(&mut self, status: &PodStatus) -> io::Result<bool> {
        let bytes = self.object(status);
        if bytes == self.last {
            return Ok(false);
        }
        crate::util::write_atomic(&self.path, &bytes).map_err(|e| {
            io::Error::new(e.kind(), format!("writing {}: {e}", self.path.display()))
        })?;
        self.last = bytes;
        Ok(true)
    }
}
