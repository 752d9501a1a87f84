//! Containers whose image is not a bundle: at each start the store is looked at and
//! `pod::image_pull` says whether to use what it has, pull first, or wait. Pulls are asked
//! of the puller (`run::puller`, in the host's namespaces, where registries are reachable)
//! over a `SOCK_SEQPACKET` socket, and their results come back on it and are read by the
//! loop: a pull never blocks the supervisor.

use std::os::fd::AsRawFd;

use super::{Config, Supervisor};
use crate::admission::Dirs;
use crate::pod::image_pull::{self, Gate, PullResult};
use crate::pod::{self, StartFailure};

/// The largest message either side sends (an error text is cut to fit).
pub const MAX_MESSAGE: usize = 8192;

/// A pull of `reference` for container `i`.
pub fn request(i: usize, reference: &str) -> Vec<u8> {
    format!("{i}\n{reference}").into_bytes()
}

pub fn parse_request(m: &[u8]) -> Option<(usize, String)> {
    let (i, r) = std::str::from_utf8(m).ok()?.split_once('\n')?;
    Some((i.parse().ok()?, r.to_string()))
}

/// The puller's answer for container `i`.
pub fn reply(i: usize, r: &PullResult) -> Vec<u8> {
    let mut m = match r {
        PullResult::Pulled { took_ms, size } => format!("{i}\nok\n{took_ms}\n{size}"),
        PullResult::Failed(e) => format!("{i}\nerr\n{e}"),
    };
    if m.len() > MAX_MESSAGE {
        let mut cut = MAX_MESSAGE;
        while !m.is_char_boundary(cut) {
            cut -= 1;
        }
        m.truncate(cut);
    }
    m.into_bytes()
}

pub fn parse_reply(m: &[u8]) -> Option<(usize, PullResult)> {
    let text = String::from_utf8_lossy(m);
    let mut parts = text.splitn(3, '\n');
    let i = parts.next()?.parse().ok()?;
    let r = match (parts.next()?, parts.next().unwrap_or("")) {
        ("ok", rest) => {
            let (took, size) = rest.split_once('\n')?;
            PullResult::Pulled {
                took_ms: took.parse().ok()?,
                size: size.parse().ok()?,
            }
        }
        ("err", e) => PullResult::Failed(e.to_string()),
        _ => return None,
    };
    Some((i, r))
}

impl Config {
    /// Where images are looked for.
    pub fn dirs(&self) -> Dirs<'_> {
        Dirs {
            bundles: &self.bundles,
            images: &self.images,
        }
    }
}

impl Supervisor<'_> {
    /// `step` asked to start container `i`: whether its image is there to start it now
    /// (always, for a bundle). Otherwise its failure is recorded, or a pull asked for.
    pub(super) fn image_ready(&mut self, i: usize, now: pod::Millis) -> bool {
        let plan = &self.cfg.plan;
        let Some(img) = self.containers[i].ctr.image.as_mut() else {
            return true;
        };
        let reference = match &img.name.reference {
            Ok(r) => r.to_string(),
            Err(e) => {
                image_pull::invalid_name(plan, &mut self.st, i, &img.name.written, e, now);
                return false;
            }
        };
        let backoff = self
            .image_backoff
            .entry(img.name.written.clone())
            .or_default();
        let stored = crate::admission::stored(&self.cfg.images, &reference).unwrap_or_else(|e| {
            crate::log::warn(&format!("image {reference}: {e}"));
            None
        });
        match img
            .gate
            .on_start(plan, &mut self.st, i, stored.is_some(), backoff, now)
        {
            Gate::Ready => {
                let ctr = &mut self.containers[i].ctr;
                let based = stored
                    .ok_or_else(|| format!("image {reference} is not in the store after its pull"))
                    .and_then(|image| {
                        let held = crate::image::store::Store::open(&self.cfg.images)
                            .and_then(|s| s.hold(&image))?;
                        if let Some(st) = ctr.image.as_mut() {
                            st.held = Some(held);
                        }
                        // The base made at admission (or the last start) serves while the
                        // name points at the same image.
                        let id =
                            crate::bundle::image::image_id(&image.name, &image.digest.to_string());
                        let same = ctr
                            .bundle
                            .as_ref()
                            .and_then(|b| b.image.as_ref())
                            .is_some_and(|r| r.id == id);
                        if same {
                            return Ok(());
                        }
                        crate::bundle::image::from_image(&image).and_then(|b| ctr.set_base(b))
                    });
                match based {
                    Ok(()) => true,
                    Err(msg) => {
                        self.st
                            .on_start_failed(plan, i, StartFailure::Create, &msg, now);
                        false
                    }
                }
            }
            Gate::Pull => {
                self.ask_pull(i, &reference, now);
                false
            }
            Gate::Failed => false,
        }
    }

    /// kubelet has a pod's image volumes before it starts a container that mounts one
    /// (`getImageVolumes`): one not on this machine, which `pullPolicy: Never` keeps from
    /// being pulled, keeps container `i` waiting in `ErrImageNeverPull` as its own image
    /// would.
    pub(super) fn image_volumes_ready(&mut self, i: usize, now: pod::Millis) -> bool {
        let mounts = self.containers[i].ctr.spec.volume_mounts.as_deref();
        for m in mounts.unwrap_or_default() {
            let missing = self
                .cfg
                .image_volumes
                .iter()
                .find(|iv| iv.name == m.name && iv.lowers.is_none());
            let Some(iv) = missing else { continue };
            let mut gate = image_pull::ImageGate::new(&iv.reference, iv.policy);
            let backoff = self.image_backoff.entry(iv.reference.clone()).or_default();
            let g = gate.on_start(&self.cfg.plan, &mut self.st, i, false, backoff, now);
            if g != Gate::Ready {
                return false;
            }
        }
        true
    }

    fn ask_pull(&mut self, i: usize, reference: &str, now: pod::Millis) {
        let sent = match &self.cfg.puller {
            Some(fd) => crate::sys::packet::send(fd.as_raw_fd(), &request(i, reference))
                .map_err(|e| format!("asking the image puller: {e}")),
            None => Err("podinit has no image puller".into()),
        };
        if let Err(e) = sent {
            self.pulled(i, PullResult::Failed(e), now);
        }
    }

    /// The puller's socket is readable: its answers, or its end.
    pub(super) fn pulls_ready(&mut self) {
        let Some(fd) = &self.cfg.puller else {
            return;
        };
        let now = self.now();
        match crate::sys::packet::recv(fd.as_raw_fd(), MAX_MESSAGE) {
            Ok(m) if !m.is_empty() => match parse_reply(&m) {
                Some((i, r)) if i < self.containers.len() => self.pulled(i, r, now),
                _ => crate::log::warn("the image puller sent a message podinit cannot read"),
            },
            end => {
                let why = match end {
                    Err(e) => format!("the image puller is gone: {e}"),
                    Ok(_) => "the image puller is gone".to_string(),
                };
                if self.st.terminating.is_none() {
                    crate::log::warn(&why);
                }
                self.cfg.puller = None;
                for i in 0..self.containers.len() {
                    let waiting = self.containers[i]
                        .ctr
                        .image
                        .as_ref()
                        .is_some_and(|m| m.gate.pulling_since.is_some());
                    if waiting {
                        self.pulled(i, PullResult::Failed(why.clone()), now);
                    }
                }
            }
        }
    }

    /// The pull for container `i`'s start ended: it starts now, or waits as `pod` says.
    fn pulled(&mut self, i: usize, r: PullResult, now: pod::Millis) {
        // A failure is said by the `Failed` event the image manager records.
        let Some(img) = self.containers[i].ctr.image.as_mut() else {
            return;
        };
        let backoff = self
            .image_backoff
            .entry(img.name.written.clone())
            .or_default();
        if img
            .gate
            .on_pulled(&self.cfg.plan, &mut self.st, i, r, backoff, now)
        {
            self.start(i);
        }
    }

    /// A pod that began terminating gives up the starts that wait for a pull.
    pub(super) fn abandon_pulls(&mut self) {
        if self.st.terminating.is_none() {
            return;
        }
        for (i, m) in self.containers.iter_mut().enumerate() {
            if let Some(img) = m.ctr.image.as_mut() {
                img.gate.abandon(&mut self.st, i);
            }
        }
    }

    /// kubelet's warning when `imagePullSecrets` name Secrets the pod was not given.
    pub(super) fn report_missing_pull_secrets(&mut self) {
        let spec = self.cfg.pod.spec.as_ref().expect("admitted pod has a spec");
        let missing: Vec<String> = spec
            .image_pull_secrets
            .iter()
            .flatten()
            .map(|s| s.name.clone())
            .filter(|n| {
                !self
                    .cfg
                    .secrets
                    .iter()
                    .any(|s| s.metadata.name.as_deref() == Some(n.as_str()))
            })
            .collect();
        if !missing.is_empty() {
            self.event(image_pull::missing_pull_secrets(&missing));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip() {
        assert_eq!(
            parse_request(&request(3, "docker.io/library/busybox:1.36")),
            Some((3, "docker.io/library/busybox:1.36".to_string()))
        );
        for r in [
            PullResult::Pulled {
                took_ms: 1234,
                size: 99,
            },
            PullResult::Failed("dial tcp 127.0.0.1:1: connection refused\nsecond line".into()),
        ] {
            assert_eq!(parse_reply(&reply(7, &r)), Some((7, r)));
        }
        let long = PullResult::Failed("é".repeat(MAX_MESSAGE));
        assert!(reply(0, &long).len() <= MAX_MESSAGE);
        assert!(parse_reply(&reply(0, &long)).is_some());
        assert_eq!(parse_reply(b"x\nok\n1\n2"), None);
        assert_eq!(parse_reply(b"1\nmaybe\n"), None);
    }
}
