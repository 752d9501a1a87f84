//! Pod volumes on the host: `emptyDir` (a directory in the state dir, a tmpfs for
//! `medium: Memory`, a hugetlbfs for `HugePages`) that lives as long as the pod and
//! survives container restarts, and
//! `hostPath` with Kubernetes' type checks. Containers bind-mount them (see `bundle`).

use k8s_openapi::api::core::v1::{HostPathVolumeSource, PodSpec, Volume};
use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::PathBuf;

use super::statedir::StateDir;
use crate::pod::volume_file::File;

/// The files of a volume of files (`configMap`, `secret`, `downwardAPI`, `projected`), or
/// `None` for another kind (`manifest::files`).
pub type FilesOf<'a> = &'a dyn Fn(&Volume) -> Result<Option<Vec<File>>, super::Error>;

/// Volume name → (host path, read-only).
pub type Prepared = BTreeMap<String, (PathBuf, bool)>;

/// Make `volumes` available on the host: volume name → (host path, read-only: volumes of
/// files are), and the volumes that could not be set up, each with why (in the volume
/// plugin's words: kubelet reports them as `FailedMount` and tries again). `node_memory`
/// (allocatable bytes) bounds a memory-backed emptyDir, as does the pod's memory limit.
pub fn prepare<'v>(
    volumes: impl IntoIterator<Item = &'v Volume>,
    spec: &PodSpec,
    sd: &StateDir,
    node_memory: i64,
    files_of: FilesOf,
) -> (Prepared, Vec<(String, String)>) {
    let mut out = BTreeMap::new();
    let mut failed = Vec::new();
    for v in volumes {
        match prepare_volume(v, spec, sd, node_memory, files_of) {
            Ok(entry) => {
                out.insert(v.name.clone(), entry);
            }
            Err(e) => failed.push((v.name.clone(), e.to_string())),
        }
    }
    (out, failed)
}

/// One volume made available on the host: (host path, read-only).
fn prepare_volume(
    v: &Volume,
    spec: &PodSpec,
    sd: &StateDir,
    node_memory: i64,
    files_of: FilesOf,
) -> Result<(PathBuf, bool), super::Error> {
    use super::Error;
    let (path, read_only) = match files_of(v)? {
        Some(files) => (
            write_files(&sd.volume_dir(&v.name), &files).map_err(Error::Volume)?,
            true,
        ),
        None => (
            prepare_one(v, spec, sd, node_memory).map_err(Error::Volume)?,
            false,
        ),
    };
    if let Some(gid) = crate::pod::fs_group::group_of(spec, v) {
        super::ownership::give(&path, gid, read_only);
    }
    Ok((path, read_only))
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

fn prepare_one(v: &Volume, spec: &PodSpec, sd: &StateDir, node_memory: i64) -> io::Result<PathBuf> {
    use crate::pod::empty_dir::Backing;
    if let Some(ed) = &v.empty_dir {
        let backing = crate::pod::empty_dir::backing(spec, ed, i128::from(node_memory))
            .map_err(io::Error::other)?;
        let dir = sd.volume_dir(&v.name);
        fs::DirBuilder::new().recursive(true).create(&dir)?;
        // kubelet makes emptyDirs world-writable so that any container user can use them.
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o777))?;
        let (fstype, data) = match backing {
            Backing::Disk => return Ok(dir),
            Backing::Memory(size) => ("tmpfs", format!("mode=0777,size={size}")),
            Backing::HugePages(page) => {
                // The kernel offers only the page sizes it has a pool of.
                let pool = format!("/sys/kernel/mm/hugepages/hugepages-{}kB", page >> 10);
                if !std::path::Path::new(&pool).exists() {
                    return Err(io::Error::other(format!(
                        "emptyDir medium {:?}: this machine has no huge pages of {} bytes ({pool} is missing)",
                        ed.medium.as_deref().unwrap_or(""),
                        page
                    )));
                }
                ("hugetlbfs", format!("pagesize={page}"))
            }
        };
        crate::sys::mount::mount(
            Some(std::path::Path::new(fstype)),
            &dir,
            Some(fstype),
            libc::MS_NOSUID | libc::MS_NODEV,
            &data,
        )
        .map_err(|e| io::Error::other(format!("mounting {fstype} on {}: {e}", dir.display())))?;
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

/// An incremental `du -x`: the bytes the files under a directory occupy (blocks, as
/// kubelet's volume statistics count them), counted a bounded number of entries at a time
/// so that a large directory never holds up the supervisor's loop.
pub struct DiskUsage {
    dev: u64,
    pending: Vec<PathBuf>,
    bytes: u64,
}

impl DiskUsage {
    pub fn new(root: &std::path::Path) -> DiskUsage {
        use std::os::unix::fs::MetadataExt;
        let meta = fs::symlink_metadata(root).ok();
        DiskUsage {
            dev: meta.as_ref().map_or(0, |m| m.dev()),
            pending: meta.map(|_| root.to_path_buf()).into_iter().collect(),
            bytes: 0,
        }
    }

    /// Count about `budget` more entries; the total once every directory has been read.
    pub fn step(&mut self, budget: usize) -> Option<u64> {
        use std::os::unix::fs::MetadataExt;
        let mut seen = 0;
        while seen < budget {
            let Some(dir) = self.pending.pop() else {
                return Some(self.bytes);
            };
            if let Ok(m) = fs::symlink_metadata(&dir) {
                self.bytes += m.blocks() * 512;
            }
            // A directory gone meanwhile (a container removed it) counts as empty.
            for e in fs::read_dir(&dir).into_iter().flatten().flatten() {
                seen += 1;
                // DirEntry::metadata does not follow symlinks.
                let Ok(m) = e.metadata() else { continue };
                if m.dev() != self.dev {
                    continue;
                }
                if m.is_dir() {
                    self.pending.push(e.path());
                } else {
                    self.bytes += m.blocks() * 512;
                }
            }
        }
        self.pending.is_empty().then_some(self.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_usage_counts_blocks_a_bounded_step_at_a_time() {
        let root = std::env::temp_dir().join(format!(
            "podinit-du-{}-{}",
            std::process::id(),
            crate::util::random_hex(4)
        ));
        for d in ["a", "a/b", "c"] {
            fs::create_dir_all(root.join(d)).unwrap();
        }
        fs::write(root.join("a/b/big"), vec![1u8; 1 << 20]).unwrap();
        fs::write(root.join("c/small"), b"x").unwrap();
        std::os::unix::fs::symlink("/usr", root.join("link")).unwrap();
        let mut du = DiskUsage::new(&root);
        let mut steps = 0;
        let total = loop {
            steps += 1;
            if let Some(t) = du.step(1) {
                break t;
            }
        };
        assert!(steps > 2, "one entry per step: {steps}");
        assert!(
            ((1 << 20)..(2 << 20)).contains(&total),
            "the file's blocks, not what the link points to: {total}"
        );
        fs::remove_dir_all(&root).unwrap();
        assert_eq!(DiskUsage::new(&root).step(10), Some(0), "gone: nothing");
    }
}
