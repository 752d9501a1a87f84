//! The store's names: `ROOT/index.json`, an OCI image index whose entries carry the full
//! name in containerd's `io.containerd.image.name` annotation (and the tag in
//! `org.opencontainers.image.ref.name`), so that the store is an OCI image layout too.

use super::digest::Digest;
use super::error::{Error, Result};
use serde_json::{json, Value};
use std::fs;
use std::io::Write;
use std::path::Path;

pub const NAME_ANNOTATION: &str = "io.containerd.image.name";
pub const REF_ANNOTATION: &str = "org.opencontainers.image.ref.name";

/// One name and the top-level manifest or index it points at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Named {
    pub name: String,
    pub digest: Digest,
    pub media_type: String,
    pub size: u64,
}

/// The names in `index`, in the order they were added.
pub fn load(index: &Path) -> Result<Vec<Named>> {
    let bytes = match fs::read(index) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => return Err(Error::io(format_args!("reading {}", index.display()), e)),
    };
    let bad = |why: String| Error::Content(format!("{}: {why}", index.display()));
    let v: Value = serde_json::from_slice(&bytes).map_err(|e| bad(e.to_string()))?;
    let mut out = vec![];
    for m in v["manifests"].as_array().into_iter().flatten() {
        let Some(name) = m["annotations"][NAME_ANNOTATION].as_str() else {
            continue;
        };
        out.push(Named {
            name: name.to_string(),
            digest: Digest::parse(m["digest"].as_str().unwrap_or_default())
                .map_err(|e| bad(e.to_string()))?,
            media_type: m["mediaType"].as_str().unwrap_or_default().to_string(),
            size: m["size"].as_u64().unwrap_or_default(),
        });
    }
    Ok(out)
}

/// Writes `names` to `index` through a temporary file in `tmp`, renamed over it.
pub fn save(index: &Path, tmp: &Path, names: &[Named]) -> Result<()> {
    let manifests: Vec<Value> = names
        .iter()
        .map(|n| {
            let tag = n
                .name
                .rsplit_once('/')
                .and_then(|(_, last)| last.split('@').next()?.split_once(':'))
                .map(|(_, t)| t.to_string());
            let mut annotations = json!({ NAME_ANNOTATION: n.name });
            if let Some(t) = tag {
                annotations[REF_ANNOTATION] = t.into();
            }
            json!({
                "mediaType": n.media_type,
                "digest": n.digest.to_string(),
                "size": n.size,
                "annotations": annotations,
            })
        })
        .collect();
    let doc = json!({
        "schemaVersion": 2,
        "mediaType": super::media::OCI_INDEX,
        "manifests": manifests,
    });
    let err = |e: std::io::Error| Error::io(format_args!("writing {}", index.display()), e);
    let mut f = tempfile_in(tmp, "index").map_err(err)?;
    f.1.write_all(&serde_json::to_vec_pretty(&doc).expect("JSON values serialise"))
        .and_then(|()| f.1.sync_all())
        .map_err(err)?;
    fs::rename(&f.0, index).map_err(err)
}

/// A new file in `dir` named for this process and moment, so that writers never share one.
pub fn tempfile_in(dir: &Path, what: &str) -> std::io::Result<(std::path::PathBuf, fs::File)> {
    loop {
        let path = dir.join(unique(what));
        match fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(f) => return Ok((path, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

/// `WHAT-PID-COUNTER-NANOS`: unique among this store's writers.
pub fn unique(what: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "{what}-{}-{}-{nanos}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let dir = std::env::temp_dir().join(unique("names-test"));
        fs::create_dir_all(&dir).unwrap();
        let index = dir.join("index.json");
        assert_eq!(load(&index).unwrap(), vec![]);
        let names = vec![
            Named {
                name: "docker.io/library/busybox:1".into(),
                digest: Digest::of(b"a"),
                media_type: super::super::media::OCI_MANIFEST.into(),
                size: 1,
            },
            Named {
                name: "localhost:5000/x@".to_string() + &Digest::of(b"b").to_string(),
                digest: Digest::of(b"b"),
                media_type: super::super::media::OCI_INDEX.into(),
                size: 2,
            },
        ];
        save(&index, &dir, &names).unwrap();
        assert_eq!(load(&index).unwrap(), names);
        let v: Value = serde_json::from_slice(&fs::read(&index).unwrap()).unwrap();
        assert_eq!(v["manifests"][0]["annotations"][REF_ANNOTATION], "1");
        assert!(v["manifests"][1]["annotations"]
            .get(REF_ANNOTATION)
            .is_none());
        fs::remove_dir_all(&dir).unwrap();
    }
}
