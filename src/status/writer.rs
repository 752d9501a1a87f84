//! `status.json`: the Pod object, replaced atomically whenever it changes.

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use std::io;
use std::path::PathBuf;

pub struct StatusWriter {
    path: PathBuf,
    pod: Pod,
    last: Vec<u8>,
    compact: Vec<u8>,
    /// The status last written: most loop turns change nothing, and comparing is far
    /// cheaper than serializing the Pod.
    last_status: Option<PodStatus>,
}

impl StatusWriter {
    /// `pod`: the effective Pod (metadata and spec); its status is replaced on each update.
    pub fn new(path: PathBuf, mut pod: Pod) -> StatusWriter {
        pod.status = None;
        StatusWriter {
            path,
            pod,
            last: Vec::new(),
            compact: b"{}".to_vec(),
            last_status: None,
        }
    }

    /// The pod's spec changed (an ephemeral container was added).
    pub fn set_spec(&mut self, spec: k8s_openapi::api::core::v1::PodSpec) {
        self.pod.spec = Some(spec);
        self.last_status = None;
    }

    /// The Pod object as last written, as one line of JSON (API and watch streams).
    pub fn compact(&self) -> Vec<u8> {
        self.compact.clone()
    }

    /// Write the file if the object changed; returns whether it did.
    pub fn update(&mut self, status: &PodStatus) -> io::Result<bool> {
        if self.last_status.as_ref() == Some(status) {
            return Ok(false);
        }
        let mut pod = self.pod.clone();
        pod.status = Some(status.clone());
        let value = serde_json::to_value(&pod).map_err(io::Error::other)?;
        let mut pretty = serde_json::to_vec_pretty(&value).map_err(io::Error::other)?;
        pretty.push(b'\n');
        if pretty == self.last {
            self.last_status = Some(status.clone());
            return Ok(false);
        }
        crate::util::write_atomic(&self.path, &pretty).map_err(|e| {
            io::Error::new(e.kind(), format!("writing {}: {e}", self.path.display()))
        })?;
        self.last = pretty;
        self.last_status = Some(status.clone());
        self.compact = serde_json::to_vec(&value).map_err(io::Error::other)?;
        Ok(true)
    }
}
