//! Containers whose image is not a bundle: at each start the store is looked at and
//! `pod::image_pull` says whether to use what it has, pull first, or wait. Pulls are asked
//! of the puller (`run::puller`, in the host's namespaces, where registries are reachable)
//! over a `SOCK_SEQPACKET` socket, and their results come back on it and are read by the
//! loop: a pull never blocks the supervisor.

use std::os::fd::AsRawFd;

use super::{Config, Supervisor};
use crate::admission::pull_logins;
use crate::admission::Dirs;
use crate::image::pull_records::Records;
use crate::image::reference::Reference;
use crate::image::store::Image;
use crate::pod::image_access::{self, Known, PullCredentials, DEFAULT_POLICY};
use crate::pod::image_pull::{self, Gate, Policy, PullResult};
use crate::pod::{self, StartFailure};

/// The largest message either side sends (an error text is cut to fit).
pub const MAX_MESSAGE: usize = 8192;

/// What a pull is for: container `container`'s image, or the image volume `volume`
/// (an index into `Config::image_volumes`) that it mounts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PullFor {
    pub container: usize,
    pub volume: Option<usize>,
}

impl std::fmt::Display for PullFor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.volume {
            Some(v) => write!(f, "{}/{v}", self.container),
            None => write!(f, "{}", self.container),
        }
    }
}

impl std::str::FromStr for PullFor {
    type Err = ();
    fn from_str(s: &str) -> Result<PullFor, ()> {
        let (c, v) = match s.split_once('/') {
            Some((c, v)) => (c, Some(v.parse().map_err(|_| ())?)),
            None => (s, None),
        };
        Ok(PullFor {
            container: c.parse().map_err(|_| ())?,
            volume: v,
        })
    }
}

/// A pull of `reference` for `to`.
pub fn request(to: PullFor, reference: &str) -> Vec<u8> {
    format!("{to}\n{reference}").into_bytes()
}

pub fn parse_request(m: &[u8]) -> Option<(PullFor, String)> {
    let (to, r) = std::str::from_utf8(m).ok()?.split_once('\n')?;
    Some((to.parse().ok()?, r.to_string()))
}

/// The puller's answer for `to`.
pub fn reply(to: PullFor, r: &PullResult) -> Vec<u8> {
    let mut m = match r {
        PullResult::Pulled { took_ms, size } => format!("{to}\nok\n{took_ms}\n{size}"),
        PullResult::Failed(e) => format!("{to}\nerr\n{e}"),
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

pub fn parse_reply(m: &[u8]) -> Option<(PullFor, PullResult)> {
    let text = String::from_utf8_lossy(m);
    let mut parts = text.splitn(3, '\n');
    let to = parts.next()?.parse().ok()?;
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
    Some((to, r))
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
                image_pull::invalid_name(plan, &mut self.st, i, &img.name.written, &e.0, now);
                return false;
            }
        };
        let stored = crate::admission::stored(&self.cfg.images, &reference).unwrap_or_else(|e| {
            crate::log::warn(&format!("image {reference}: {e}"));
            None
        });
        let policy = img.gate.policy;
        let name = img.name.reference.clone();
        let written = img.name.written.clone();
        let usable = match (&stored, &name) {
            (Some(image), Ok(name)) => self.may_use(name, image, policy),
            _ => false,
        };
        let plan = &self.cfg.plan;
        let backoff = self.image_backoff.entry(written).or_default();
        let Some(img) = self.containers[i].ctr.image.as_mut() else {
            return true;
        };
        match img
            .gate
            .on_start(plan, &mut self.st, i, usable, backoff, now)
        {
            Gate::Ready => {
                let ctr = &mut self.containers[i].ctr;
                let spec = ctr.spec(self.cfg.pod_spec());
                let based = stored
                    .ok_or_else(|| super::Error::Vanished {
                        what: format!("image {reference}"),
                    })
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
                        crate::bundle::image::from_image(&image)
                            .map_err(super::Error::from)
                            .and_then(|b| ctr.set_base(b, &spec))
                    });
                match based {
                    Ok(()) => true,
                    Err(e) => {
                        let msg = e.to_string();
                        self.st
                            .on_start_failed(plan, i, StartFailure::Create, &msg, now);
                        false
                    }
                }
            }
            Gate::Pull => {
                let to = PullFor {
                    container: i,
                    volume: None,
                };
                self.ask_pull(to, &reference, now);
                false
            }
            Gate::Failed => false,
        }
    }

    /// kubelet has a pod's image volumes before it starts a container that mounts one
    /// (`getImageVolumes`, then `toKubeContainerImageVolumes`): each image volume container
    /// `i` mounts goes through kubelet's image manager as its own image does (used as the
    /// store has it, pulled first, or refused, with the volume's `pullPolicy` and the pod's
    /// back-off of that image), and is mounted once the store has it. A volume that is not
    /// ready keeps the container waiting with the image's reason; one being pulled starts
    /// it again when the pull ends (`pulled`). A bundle's volume was mounted with the sandbox.
    pub(super) fn image_volumes_ready(&mut self, i: usize, now: pod::Millis) -> bool {
        let spec = self.containers[i].ctr.spec(self.cfg.pod_spec());
        let mut wanted: Vec<usize> = spec
            .volume_mounts
            .iter()
            .flatten()
            .filter_map(|m| {
                let v = self
                    .cfg
                    .image_volumes
                    .iter()
                    .position(|iv| iv.name == m.name)?;
                self.cfg.image_volumes[v].stored.then_some(v)
            })
            .collect();
        wanted.sort_unstable();
        wanted.dedup();
        for v in wanted {
            let iv = &self.cfg.image_volumes[v];
            let name = iv.normalised.clone();
            let stored = crate::admission::stored(&self.cfg.images, &name).unwrap_or_else(|e| {
                crate::log::warn(&format!("image volume {:?}: {name}: {e}", iv.name));
                None
            });
            let policy = iv.policy;
            let present = match (&stored, Reference::parse(&name)) {
                (Some(image), Ok(r)) => self.may_use(&r, image, policy),
                _ => false,
            };
            let iv = &self.cfg.image_volumes[v];
            let gate = self
                .volume_gates
                .entry((i, v))
                .or_insert_with(|| image_pull::ImageGate::for_volume(&iv.reference, iv.policy));
            let backoff = self.image_backoff.entry(iv.reference.clone()).or_default();
            match gate.on_start(&self.cfg.plan, &mut self.st, i, present, backoff, now) {
                Gate::Ready => {
                    if let Err(e) = self.mount_image_volume(v) {
                        let msg = e.to_string();
                        self.st
                            .on_start_failed(&self.cfg.plan, i, StartFailure::Create, &msg, now);
                        return false;
                    }
                }
                Gate::Pull => {
                    let to = PullFor {
                        container: i,
                        volume: Some(v),
                    };
                    self.ask_pull(to, &name, now);
                    return false;
                }
                Gate::Failed => return false,
            }
        }
        true
    }

    /// Whether the pod may use the image the store has for `name` without pulling it
    /// first: kubelet's `MustAttemptImagePull` with its default policy, from the store's
    /// pull records and the logins the pod's imagePullSecrets give for the image's
    /// registry (docs/semantics.md §Container status). `Always` pulls whatever this
    /// says. Records that cannot be read make the pod verify, as under kubelet.
    fn may_use(&mut self, name: &Reference, image: &Image, policy: Policy) -> bool {
        if policy == Policy::Always {
            return true;
        }
        let records = Records::of(&self.cfg.images);
        let image_ref = image.digest.to_string();
        let record = match records.pulled(&image_ref) {
            Ok(r) => r,
            Err(e) => {
                crate::log::warn(&format!("image {name}: {e}"));
                return false;
            }
        };
        let known = Known {
            record: record.as_ref(),
            intent: records.intent(&name.to_string()),
        };
        let logins = self.pull_logins.get_or_insert_with(|| {
            let spec = &self.cfg.pod;
            pull_logins::logins(&pull_logins::secret_configs(spec, &self.cfg.secrets))
        });
        let presented = pull_logins::presented(logins, name);
        let repository = name.repository();
        let verdict =
            image_access::must_attempt_pull(&DEFAULT_POLICY, &repository, known, &presented);
        if let Some(s) = verdict.remember {
            let creds = PullCredentials::of_pull(Some(s));
            if let Err(e) = records.record(&image_ref, &repository, Some(&creds)) {
                crate::log::warn(&format!("the pull record of {name}: {e}"));
            }
        }
        !verdict.pull
    }

    /// Image volume `v`, which the store has, mounted read-only from the store's layers,
    /// if it is not yet: the first container that mounts it after its pull makes the
    /// mount every later one shares, as the pod's other volumes are shared.
    fn mount_image_volume(&mut self, v: usize) -> Result<(), super::Error> {
        use super::Error;
        let iv = &self.cfg.image_volumes[v];
        if self.cfg.volumes.contains_key(&iv.name) {
            return Ok(());
        }
        let what = format!("image volume {:?} ({})", iv.name, iv.reference);
        let image = crate::admission::stored(&self.cfg.images, &iv.normalised)
            .map_err(|e| Error::from(e).within(&what))?
            .ok_or_else(|| {
                let gone = Error::Vanished {
                    what: "the image".into(),
                };
                gone.within(&what)
            })?;
        let b =
            crate::bundle::image::from_image(&image).map_err(|e| Error::from(e).within(&what))?;
        let name = iv.name.clone();
        self.cfg.image_volumes[v].lowers = Some(b.lowers);
        let failed =
            super::set_up_volumes(&mut self.cfg, self.sd, Some(std::slice::from_ref(&name)));
        match failed.into_iter().next() {
            Some((_, e)) => Err(Error::Volume(e).within(what)),
            None => Ok(()),
        }
    }

    fn ask_pull(&mut self, to: PullFor, reference: &str, now: pod::Millis) {
        let sent = match &self.cfg.puller {
            Some(fd) => crate::sys::packet::send(fd.as_raw_fd(), &request(to, reference))
                .map_err(|e| format!("asking the image puller: {e}")),
            None => Err("podinit has no image puller".into()),
        };
        if let Err(e) = sent {
            self.pulled(to, PullResult::Failed(e), now);
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
                Some((to, r)) if to.container < self.containers.len() => self.pulled(to, r, now),
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
                let mut waiting: Vec<PullFor> = (0..self.containers.len())
                    .filter(|&i| {
                        self.containers[i]
                            .ctr
                            .image
                            .as_ref()
                            .is_some_and(|m| m.gate.pulling_since.is_some())
                    })
                    .map(|container| PullFor {
                        container,
                        volume: None,
                    })
                    .collect();
                waiting.extend(
                    self.volume_gates
                        .iter()
                        .filter(|(_, g)| g.pulling_since.is_some())
                        .map(|(&(container, v), _)| PullFor {
                            container,
                            volume: Some(v),
                        }),
                );
                for to in waiting {
                    self.pulled(to, PullResult::Failed(why.clone()), now);
                }
            }
        }
    }

    /// The pull for a start ended: the container starts now, or waits as `pod` says.
    fn pulled(&mut self, to: PullFor, r: PullResult, now: pod::Millis) {
        let i = to.container;
        // A failure is said by the `Failed` event the image manager records.
        let (gate, key) = match to.volume {
            Some(v) => {
                let Some(iv) = self.cfg.image_volumes.get(v) else {
                    return;
                };
                let Some(g) = self.volume_gates.get_mut(&(i, v)) else {
                    return;
                };
                (g, iv.reference.clone())
            }
            None => {
                let Some(img) = self.containers[i].ctr.image.as_mut() else {
                    return;
                };
                (&mut img.gate, img.name.written.clone())
            }
        };
        let backoff = self.image_backoff.entry(key).or_default();
        if gate.on_pulled(&self.cfg.plan, &mut self.st, i, r, backoff, now) {
            self.start(i);
        } else {
            // The next start is kubelet's next sync: it has the image volumes again.
            self.containers[i].volumes_ready = false;
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
        for (&(i, _), g) in self.volume_gates.iter_mut() {
            g.abandon(&mut self.st, i);
        }
    }

    /// kubelet's warning when `imagePullSecrets` name Secrets the pod was not given.
    pub(super) fn report_missing_pull_secrets(&mut self) {
        let spec = self.cfg.pod_spec();
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
        let c3 = PullFor {
            container: 3,
            volume: None,
        };
        let v = PullFor {
            container: 2,
            volume: Some(1),
        };
        assert_eq!(
            parse_request(&request(c3, "docker.io/library/busybox:1.36")),
            Some((c3, "docker.io/library/busybox:1.36".to_string()))
        );
        assert_eq!(
            parse_request(&request(v, "reg:5000/data:v1")),
            Some((v, "reg:5000/data:v1".to_string()))
        );
        assert_eq!(parse_request(b"2/x\nreg:5000/data:v1"), None);
        for r in [
            PullResult::Pulled {
                took_ms: 1234,
                size: 99,
            },
            PullResult::Failed("dial tcp 127.0.0.1:1: connection refused\nsecond line".into()),
        ] {
            assert_eq!(parse_reply(&reply(v, &r)), Some((v, r.clone())));
            assert_eq!(parse_reply(&reply(c3, &r)), Some((c3, r)));
        }
        let long = PullResult::Failed("é".repeat(MAX_MESSAGE));
        assert!(reply(c3, &long).len() <= MAX_MESSAGE);
        assert!(parse_reply(&reply(c3, &long)).is_some());
        assert_eq!(parse_reply(b"x\nok\n1\n2"), None);
        assert_eq!(parse_reply(b"1\nmaybe\n"), None);
    }
}
