//! Reading the env file of a `fileKeyRef` from its emptyDir on the host at a container's
//! start (the parsing is `manifest::env_file`'s). The path is resolved inside the volume,
//! symlinks included, so a file an init container wrote cannot point kubelet's read
//! outside it.

use super::error::{Error, Result};
use crate::bundle::HostVolume;
use crate::manifest::env_file::MAX_FILE_BYTES;
use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The text of `path` in volume `vol`; `None` when the file does not exist.
pub fn read(
    volumes: &BTreeMap<String, HostVolume>,
    vol: &str,
    path: &str,
) -> Result<Option<String>> {
    let Some(v) = volumes.get(vol) else {
        return Err(Error::EnvFileVolume {
            volume: vol.to_string(),
            path: path.to_string(),
        });
    };
    let why = |e: Error| Error::EnvFileRead {
        volume: vol.to_string(),
        path: path.to_string(),
        err: Box::new(e),
    };
    let full = crate::runtime::mounts::secure_join(&v.host_path, Path::new(path), &|p| {
        std::fs::read_link(p).ok()
    })
    .map_err(|e| why(Error::Runtime(e)))?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&full);
    let file = match file {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(why(Error::Os(e))),
    };
    let mut buf = Vec::new();
    file.take(MAX_FILE_BYTES as u64 + 1)
        .read_to_end(&mut buf)
        .map_err(|e| why(Error::Os(e)))?;
    if buf.len() > MAX_FILE_BYTES {
        return Err(Error::EnvFileTooLarge {
            volume: vol.to_string(),
            path: path.to_string(),
            max_kib: MAX_FILE_BYTES / 1024,
        });
    }
    Ok(Some(String::from_utf8_lossy(&buf).into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn volumes(root: &Path) -> BTreeMap<String, HostVolume> {
        let mut m = BTreeMap::new();
        m.insert(
            "config".to_string(),
            HostVolume {
                host_path: root.to_path_buf(),
                read_only: false,
                made_at: None,
            },
        );
        m
    }

    #[test]
    fn a_file_missing_too_large_or_escaping_by_a_link() {
        let dir = std::env::temp_dir().join(format!("podinit-envfiles-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("vol")).unwrap();
        std::fs::write(dir.join("outside.env"), "K='secret'\n").unwrap();
        std::fs::write(dir.join("vol/config.env"), "K='v'\n").unwrap();
        std::fs::write(dir.join("vol/big.env"), vec![b'#'; MAX_FILE_BYTES + 1]).unwrap();
        std::os::unix::fs::symlink("../outside.env", dir.join("vol/link.env")).unwrap();
        let v = volumes(&dir.join("vol"));
        assert_eq!(
            read(&v, "config", "config.env").unwrap().as_deref(),
            Some("K='v'\n")
        );
        assert_eq!(read(&v, "config", "nope.env").unwrap(), None);
        assert!(read(&v, "config", "big.env")
            .unwrap_err()
            .to_string()
            .contains("larger than 64 KiB"));
        // The link resolves inside the volume, where there is no outside.env.
        assert_eq!(read(&v, "config", "link.env").unwrap(), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
