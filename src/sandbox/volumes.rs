//! Pod volumes on the host: `emptyDir` (a directory in the state dir, or a tmpfs for
//! `medium: Memory`) that lives as long as the pod and survives container restarts, and
//! `hostPath` with Kubernetes' type checks. Containers bind-mount them (see `bundle`).

use k8s_openapi::api::core::v1::{HostPathVolumeSource, Volume};
use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::PathBuf;

use super::statedir::StateDir;
use crate::pod::volume_file::File;

/// The files of a volume of files (`configMap`, `secret`, `downwardAPI`, `projected`), or
/// `None` for another kind (`manifest::files`).
pub type FilesOf<'a> = &'a dyn Fn(&Volume) -> Result<Option<Vec<File>>, String>;

/// Volume name → (host path, read-only).
pub type Prepared = BTreeMap<String, (PathBuf, bool)>;

/// Make `volumes` available on the host: volume name → (host path, read-only: volumes of
/// files are), and the volumes that could not be set up, each with why (in the volume
/// plugin's words: kubelet reports them as `FailedMount` and tries again). `size_bytes`
/// converts a Kubernetes quantity (`sizeLimit`) to bytes.
pub fn prepare<'v>(
    volumes: impl IntoIterator<Item = &'v Volume>,
    sd: &StateDir,
    size_bytes: &dyn Fn(&str) -> Result<u64, String>,
    files_of: FilesOf,
) -> (Prepared, Vec<(String, String)>) {
    let mut out = BTreeMap::new();
    let mut failed = Vec::new();
    for v in volumes {
        match prepare_volume(v, sd, size_bytes, files_of) {
            Ok(entry) => {
                out.insert(v.name.clone(), entry);
            }
            Err(e) => failed.push((v.name.clone(), e)),
        }
    }
    (out, failed)
}

/// One volume made available on the host: (host path, read-only).
fn prepare_volume(
    v: &Volume,
    sd: &StateDir,
    size_bytes: &dyn Fn(&str) -> Result<u64, String>,
    files_of: FilesOf,
) -> Result<(PathBuf, bool), String> {
    Ok(match files_of(v)? {
        Some(files) => (
            write_files(&sd.volume_dir(&v.name), &files).map_err(|e| e.to_string())?,
            true,
        ),
        None => (
            prepare_one(v, sd, size_bytes).map_err(|e| e.to_string())?,
            false,
        ),
    })
}

/// A volume of files: written once, before any container starts, mounted read-only.
fn write_files(dir: &std::path::Path, files: &[File]) -> io::Result<PathBuf> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(dir)?;
    for f in files {
        let rel = std::path::Path::new(&f.path);
        if rel.is_absolute()
            || rel
                .components()
                .any(|c| matches!(c, std::path::Component::ParentDir))
        {
            return Err(io::Error::other(format!("invalid file path {:?}", f.path)));
        }
        let p = dir.join(rel);
        if let Some(parent) = p.parent() {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(parent)?;
        }
        fs::write(&p, &f.data)
            .map_err(|e| io::Error::new(e.kind(), format!("writing {}: {e}", p.display())))?;
        fs::set_permissions(&p, fs::Permissions::from_mode(f.mode))?;
    }
    Ok(dir.to_path_buf())
}

fn prepare_one(
    v: &Volume,
    sd: &StateDir,
    size_bytes: &dyn Fn(&str) -> Result<u64, String>,
) -> io::Result<PathBuf> {
    if let Some(ed) = &v.empty_dir {
        let dir = sd.volume_dir(&v.name);
        fs::DirBuilder::new().recursive(true).create(&dir)?;
        // kubelet makes emptyDirs world-writable so that any container user can use them.
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o777))?;
        if ed.medium.as_deref() == Some("Memory") {
            let mut data = String::from("mode=0777");
            if let Some(q) = &ed.size_limit {
                let b = size_bytes(&q.0).map_err(io::Error::other)?;
                data.push_str(&format!(",size={b}"));
            }
            crate::sys::mount::mount(
                Some(std::path::Path::new("tmpfs")),
                &dir,
                Some("tmpfs"),
                libc::MS_NOSUID | libc::MS_NODEV,
                &data,
            )
            .map_err(|e| io::Error::other(format!("mounting tmpfs on {}: {e}", dir.display())))?;
        }
        return Ok(dir);
    }
    if let Some(hp) = &v.host_path {
        return host_path(hp);
    }
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "volume source not supported",
    ))
}

/// Kubernetes' hostPath `type` checks (and creation for the *OrCreate types).
fn host_path(hp: &HostPathVolumeSource) -> io::Result<PathBuf> {
    let p = PathBuf::from(&hp.path);
    let ty = hp.type_.as_deref().unwrap_or("");
    let meta = fs::metadata(&p);
    let fail = |what: &str| {
        Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "hostPath type check failed: {} is not a {what}",
                p.display()
            ),
        ))
    };
    match ty {
        "" => {}
        "DirectoryOrCreate" => {
            if meta.is_err() {
                fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o755)
                    .create(&p)?;
            } else if !meta?.is_dir() {
                return fail("directory");
            }
        }
        "Directory" => {
            if !meta.map(|m| m.is_dir()).unwrap_or(false) {
                return fail("directory");
            }
        }
        "FileOrCreate" => {
            if meta.is_err() {
                if let Some(parent) = p.parent() {
                    fs::create_dir_all(parent)?;
                }
                fs::OpenOptions::new()
                    .create(true)
                    .truncate(false)
                    .write(true)
                    .mode(0o644)
                    .open(&p)?;
            } else if !meta?.is_file() {
                return fail("file");
            }
        }
        "File" => {
            if !meta.map(|m| m.is_file()).unwrap_or(false) {
                return fail("file");
            }
        }
        "Socket" | "CharDevice" | "BlockDevice" => {
            let ft = meta.map(|m| m.file_type());
            let ok = match ty {
                "Socket" => ft.map(|t| t.is_socket()),
                "CharDevice" => ft.map(|t| t.is_char_device()),
                _ => ft.map(|t| t.is_block_device()),
            };
            if !ok.unwrap_or(false) {
                return fail(ty);
            }
        }
        other => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("hostPath type {other:?} not supported"),
            ))
        }
    }
    Ok(p)
}
