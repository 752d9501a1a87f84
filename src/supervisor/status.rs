//! The pod's status out: status.json, the API's watchers and the service manager, each
//! time it changes; and the deletion recorded in its metadata.

use super::Supervisor;
use crate::api::server::Stream;
use crate::pod;
use crate::status::render::{self, ContainerMeta};

/// How soon a status.json that could not be written is tried again.
const STATUS_RETRY_MS: pod::Millis = 1000;
/// How long an ended pod waits for room to write its final status and events.
const FINAL_WRITE_MS: pod::Millis = 30_000;

impl Supervisor<'_> {
    pub(super) fn write_status(&mut self) {
        let meta: Vec<ContainerMeta> = self
            .containers
            .iter()
            .map(|m| (&m.ctr, m.observed))
            .map(|(c, observed)| {
                let spec = c.spec(self.cfg.pod_spec());
                let written = spec.image.as_deref().unwrap_or_default();
                // An image never pulled has no ID yet, as under kubelet.
                let (image, image_id) = c
                    .bundle
                    .as_ref()
                    .map_or((written.to_string(), String::new()), |b| {
                        b.status_image(written)
                    });
                ContainerMeta {
                    image,
                    image_id,
                    container_id: c.container_id.clone(),
                    user: c.user.clone(),
                    mounts: spec.volume_mounts.clone().unwrap_or_default(),
                    rro_supported: self.cfg.rro_supported,
                    resources: c.allocated.clone(),
                    observed,
                }
            })
            .collect();
        let mut status = render::pod_status(
            &self.cfg.plan,
            &self.st,
            &meta,
            &self.clock,
            &self.cfg.pod_ips,
        );
        // Pod-level resources (KEP-5419): what the pod cgroup has been given.
        let spec = self.cfg.pod.spec.as_ref();
        if spec.is_some_and(crate::pod::resources::pod_level_set) {
            let r = self.pod_allocated.clone();
            status.allocated_resources = r.as_ref().and_then(|r| r.requests.clone());
            status.resources = r;
        }
        let (changed, file) = self.status.update(&self.cfg.pod, &status);
        match &file {
            Err(e) if !self.status_failing => {
                crate::log::warn(&format!("{e} (retrying every {STATUS_RETRY_MS} ms)"))
            }
            Ok(()) if self.status_failing => crate::log::info(&format!(
                "{} written again",
                self.sd.root.join("status.json").display()
            )),
            _ => {}
        }
        self.status_failing = file.is_err();
        // Events that found the disk full are appended once it has room, in order.
        let events = if self.events.has_pending() {
            self.events.flush()
        } else {
            Ok(())
        };
        match &events {
            Err(e) if !self.events_failing => crate::log::warn(&format!(
                "appending to {}: {e} (retrying every {STATUS_RETRY_MS} ms)",
                self.sd.root.join("events.jsonl").display()
            )),
            Ok(()) if self.events_failing => crate::log::info(&format!(
                "{} written again",
                self.sd.root.join("events.jsonl").display()
            )),
            _ => {}
        }
        self.events_failing = events.is_err();
        if self.status_failing || self.events_failing {
            // The loop sleeps until the next event otherwise, leaving the file stale.
            self.wake.insert(self.now() + STATUS_RETRY_MS);
        }
        if changed {
            // The API and the watchers see the change whether the file could be written.
            let line = self.pod_line();
            if let Some(srv) = &mut self.server {
                srv.broadcast(&Stream::Pod, &line);
            }
            let phase = status.phase.clone().unwrap_or_default();
            let ready = status
                .conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == "Ready" && c.status == "True");
            self.cfg.notifier.status(&line, &phase, ready);
        }
    }

    /// After the pod's end: a status.json or events that the disk had no room for are
    /// retried, for up to `FINAL_WRITE_MS`, while the API goes on answering, so that a full
    /// disk freed in time loses neither the final status nor an event.
    pub(super) fn finish_writing(&mut self, sig: &crate::sys::signal_pipe::SignalPipe) {
        if !self.status_failing && !self.events_failing {
            return;
        }
        let give_up = self.now() + FINAL_WRITE_MS;
        crate::log::warn(&format!(
            "the pod has ended: its final status and events wait for room in {} for up to {} s",
            self.sd.root.display(),
            FINAL_WRITE_MS / 1000
        ));
        while (self.status_failing || self.events_failing) && self.now() < give_up {
            self.wait_and_observe(sig);
            self.write_status();
        }
        if self.status_failing || self.events_failing {
            crate::log::error(&format!(
                "no room in {} after {} s: the pod's final status or events are not written",
                self.sd.root.display(),
                FINAL_WRITE_MS / 1000
            ));
        }
    }

    pub(super) fn terminate_signal(&mut self, s: i32) {
        let now = self.now();
        let grace = self.st.on_stop_signal();
        crate::log::info(&format!(
            "received {}: {}",
            crate::sys::signals::signal_name(s),
            if grace == Some(0) {
                "forcing termination"
            } else {
                "terminating the pod"
            }
        ));
        self.delete(now, grace);
    }

    /// A deletion: by a signal, `POST /v1/pod/terminate` or `podinit stop`.
    pub(super) fn delete(&mut self, now: pod::Millis, grace: Option<u64>) {
        if self.st.request_deletion(&self.cfg.plan, now, grace) {
            if let Some((at, grace)) = self.st.deletion {
                // As the API server records a deletion in the object's metadata.
                let meta = &mut self.cfg.pod.metadata;
                meta.deletion_timestamp = Some(self.clock.at(at));
                meta.deletion_grace_period_seconds = Some(grace as i64);
                self.status.pod_changed();
            }
        }
    }

    /// The Pod object as one JSON line (the `GET /v1/pod` body and each watch line).
    pub(super) fn pod_line(&self) -> Vec<u8> {
        super::api::line(self.status.compact())
    }
}
