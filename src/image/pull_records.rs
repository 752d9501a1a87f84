//! The store's pull records (KEP-2535; docs/images.md §Pull records): for each image a pod
//! pulled, kubelet's `ImagePulledRecord` (which Secrets' logins pulled it, or that any
//! pod may use it), and a pull intent while a pull is under way, as kubelet keeps them
//! under `/var/lib/kubelet/image_manager/{pulled,pulling}`. `pod::image_access` decides
//! with them. Files enter by rename under a lock, so a reader sees a whole record and two
//! pods' pulls do not lose each other's; they outlive `podinit run` and go with
//! `podinit images rm`.

use super::digest::Digest;
use super::error::{Error, Result};
use super::lock;
use super::names;
use super::registry::Credential;
use crate::pod::image_access::{self, PullCredentials, PulledRecord};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

pub struct Records {
    dir: PathBuf,
}

/// A hash of a login as a record keeps it: its registry, user and password, never the
/// login itself.
pub fn credential_hash(c: &Credential) -> String {
    let mut b = Vec::new();
    for part in [&c.registry, &c.username, &c.password] {
        b.extend_from_slice(part.as_bytes());
        b.push(0);
    }
    Digest::of(&b).hex
}

impl Records {
    /// The records of the store at `store_root`.
    pub fn of(store_root: &Path) -> Records {
        Records {
            dir: store_root.join("pull-records"),
        }
    }

    /// kubelet's file names: `sha256-<hex of the key's SHA-256>`.
    fn file(&self, kind: &str, key: &str) -> PathBuf {
        self.dir
            .join(kind)
            .join(format!("sha256-{}", Digest::of(key.as_bytes()).hex))
    }

    fn lock(&self) -> Result<lock::Lock> {
        fs::create_dir_all(&self.dir)
            .map_err(|e| Error::io(format_args!("pull records: {}", self.dir.display()), e))?;
        lock::take(&self.dir.join("records.lock"), true)
    }

    /// The record of the image `image_ref` (its digest), if any.
    pub fn pulled(&self, image_ref: &str) -> Result<Option<PulledRecord>> {
        let p = self.file("pulled", image_ref);
        let data = match fs::read(&p) {
            Ok(d) => d,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(format_args!("reading {}", p.display()), e)),
        };
        serde_json::from_slice(&data)
            .map(Some)
            .map_err(|e| Error::Content(format!("pull record {}: {e}", p.display())))
    }

    /// A pull of `image` (its normalised name) began and has not ended.
    pub fn intent(&self, image: &str) -> bool {
        self.file("pulling", image).exists()
    }

    /// A pull of `image` begins (`RecordPullIntent`).
    pub fn begin(&self, image: &str) -> Result<()> {
        let _l = self.lock()?;
        self.write(&self.file("pulling", image), image.as_bytes())
    }

    /// The pull of `image` ended, however (`RecordImagePullFailed`, or after
    /// `RecordImagePulled`).
    pub fn end(&self, image: &str) -> Result<()> {
        let _l = self.lock()?;
        remove(&self.file("pulling", image))
    }

    /// The image `image_ref` of `repository` was pulled with `creds`, or a check matched
    /// them: merged into its record (`writePulledRecordIfChanged`).
    pub fn record(
        &self,
        image_ref: &str,
        repository: &str,
        creds: Option<&PullCredentials>,
    ) -> Result<()> {
        let _l = self.lock()?;
        let old = self.pulled(image_ref).unwrap_or_else(|e| {
            crate::log::warn(&format!("{e}: written again"));
            None
        });
        let now = crate::util::rfc3339(crate::util::now_unix_nanos(), crate::util::Fraction::Whole);
        let Some(new) =
            image_access::record_pulled(old.as_ref(), image_ref, repository, creds, &now)
        else {
            return Ok(());
        };
        let json = serde_json::to_vec(&new)
            .map_err(|e| Error::Content(format!("pull record of {image_ref}: {e}")))?;
        self.write(&self.file("pulled", image_ref), &json)
    }

    /// The image `image_ref` left the store: its record goes with it.
    pub fn forget(&self, image_ref: &str) -> Result<()> {
        if !self.file("pulled", image_ref).exists() {
            return Ok(());
        }
        let _l = self.lock()?;
        remove(&self.file("pulled", image_ref))
    }

    fn write(&self, path: &Path, data: &[u8]) -> Result<()> {
        let dir = path.parent().unwrap_or(&self.dir);
        let ctx = |e| Error::io(format_args!("writing {}", path.display()), e);
        fs::create_dir_all(dir).map_err(ctx)?;
        let tmp = dir.join(format!(".{}", names::unique("record")));
        fs::write(&tmp, data)
            .and_then(|()| fs::rename(&tmp, path))
            .inspect_err(|_| {
                let _ = fs::remove_file(&tmp);
            })
            .map_err(ctx)
    }
}

fn remove(p: &Path) -> Result<()> {
    match fs::remove_file(p) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => {
            Err(Error::io(format_args!("removing {}", p.display()), e))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod::image_access::{Known, PullSecret, DEFAULT_POLICY};

    #[test]
    fn records_survive_and_merge_and_go() {
        let dir = std::env::temp_dir().join(names::unique("podinit-records-test"));
        let r = Records::of(&dir);
        let digest = "sha256:1111";
        let repo = "r:5000/app";
        assert_eq!(r.pulled(digest).unwrap(), None);
        r.begin("r:5000/app:v1").unwrap();
        assert!(r.intent("r:5000/app:v1"));
        let a = PullSecret {
            uid: String::new(),
            namespace: "default".into(),
            name: "regcred".into(),
            credential_hash: "h1".into(),
        };
        r.record(
            digest,
            repo,
            Some(&PullCredentials::of_pull(Some(a.clone()))),
        )
        .unwrap();
        r.end("r:5000/app:v1").unwrap();
        assert!(!r.intent("r:5000/app:v1"));
        // A second opening (a later pod) reads what the first wrote.
        let again = Records::of(&dir).pulled(digest).unwrap().unwrap();
        let known = Known {
            record: Some(&again),
            intent: false,
        };
        assert!(!image_access::must_attempt_pull(&DEFAULT_POLICY, repo, known, &[a]).pull);
        assert!(image_access::must_attempt_pull(&DEFAULT_POLICY, repo, known, &[]).pull);
        // An anonymous pull later opens it to every pod.
        r.record(digest, repo, Some(&PullCredentials::of_pull(None)))
            .unwrap();
        let open = r.pulled(digest).unwrap().unwrap();
        assert!(open.credential_mapping[repo].node_pods_accessible);
        r.forget(digest).unwrap();
        assert_eq!(r.pulled(digest).unwrap(), None);
        // No temporary file is left beside the records.
        let left: Vec<_> = fs::read_dir(dir.join("pull-records/pulled"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(left.is_empty(), "{left:?}");
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_hash_differs_for_each_part_of_a_login() {
        let c = |r: &str, u: &str, p: &str| Credential {
            registry: r.into(),
            username: u.into(),
            password: p.into(),
        };
        let h = credential_hash(&c("r:5000", "u", "p"));
        assert_eq!(h, credential_hash(&c("r:5000", "u", "p")));
        assert_ne!(h, credential_hash(&c("r:5000", "u", "q")));
        assert_ne!(h, credential_hash(&c("r:5000", "up", "")));
        assert_eq!(h.len(), 64, "a SHA-256 in hex");
    }
}
