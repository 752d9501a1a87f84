//! Paths below a container's root, created and mounted on without following a link that
//! may have appeared since the path was resolved (CVE-2021-30465, CVE-2024-45310): another
//! container sharing a volume can swap a directory for a symlink between the runtime's
//! look and its use. Each component is opened from its parent's fd with `O_NOFOLLOW`, a
//! missing one made with `mkdirat` in that parent, and a mount goes onto the fd's
//! `/proc/self/fd/N`, the very file the walk found, as runc's `WithProcfd`.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path};

use nix::fcntl::{openat, OFlag};
use nix::sys::stat::Mode;

fn invalid(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, what)
}

/// The components of `path` below `root`; `path` must be `root` joined with plain names
/// (what `runtime::mounts::secure_join` returns).
fn components<'a>(root: &Path, path: &'a Path) -> io::Result<Vec<&'a OsStr>> {
    let rel = path.strip_prefix(root).map_err(|_| {
        invalid(format!(
            "{} is not below {}",
            path.display(),
            root.display()
        ))
    })?;
    rel.components()
        .map(|c| match c {
            Component::Normal(n) => Ok(n),
            _ => Err(invalid(format!("{} is not a plain path", path.display()))),
        })
        .collect()
}

fn open_root(root: &Path) -> io::Result<OwnedFd> {
    nix::fcntl::open(
        root,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(io::Error::from)
}

/// The directory `name` in `dir`, never through a link (ENOTDIR for one).
fn dir_in(dir: BorrowedFd, name: &OsStr) -> io::Result<OwnedFd> {
    openat(
        dir,
        name,
        OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(io::Error::from)
}

/// Walk `names` from `start`, making the missing directories when `create`.
fn walk(start: OwnedFd, names: &[&OsStr], create: bool) -> io::Result<OwnedFd> {
    let mut cur = start;
    for name in names {
        cur = match dir_in(cur.as_fd(), name) {
            Err(e) if create && e.raw_os_error() == Some(libc::ENOENT) => {
                match nix::sys::stat::mkdirat(cur.as_fd(), *name, Mode::from_bits_truncate(0o755)) {
                    Ok(()) | Err(nix::errno::Errno::EEXIST) => {}
                    Err(e) => return Err(e.into()),
                }
                dir_in(cur.as_fd(), name)?
            }
            r => r?,
        };
    }
    Ok(cur)
}

/// mkdir -p of `path` below `root`, no link followed.
pub fn ensure_dir(root: &Path, path: &Path) -> io::Result<()> {
    let names = components(root, path)?;
    walk(open_root(root)?, &names, true).map(drop)
}

/// An empty file at `path` below `root` (its parents made), no link followed; an existing
/// file is left as it is.
pub fn create_file(root: &Path, path: &Path) -> io::Result<()> {
    let names = components(root, path)?;
    let Some((last, parents)) = names.split_last() else {
        return Err(invalid(format!("{} is the root itself", path.display())));
    };
    let dir = walk(open_root(root)?, parents, true)?;
    openat(
        dir.as_fd(),
        *last,
        OFlag::O_CREAT | OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o644),
    )
    .map(drop)
    .map_err(io::Error::from)
}

/// What is at `path` below `root`, reached with no link followed: an `O_PATH` fd on the
/// mount on top of it, if any (the walk crosses mounts).
pub fn open(root: &Path, path: &Path) -> io::Result<OwnedFd> {
    let names = components(root, path)?;
    let Some((last, parents)) = names.split_last() else {
        return open_root(root);
    };
    let dir = walk(open_root(root)?, parents, false)?;
    let fd = openat(
        dir.as_fd(),
        *last,
        OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    let st = nix::sys::stat::fstat(fd.as_fd())?;
    if st.st_mode & libc::S_IFMT == libc::S_IFLNK {
        return Err(io::Error::from_raw_os_error(libc::ELOOP));
    }
    Ok(fd)
}

/// mount(2) onto `target` below `root`, reached by [`open`]: the mount lands on the file
/// the walk found, whatever the path names by the time of the call.
pub fn mount(
    root: &Path,
    src: Option<&Path>,
    target: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: &str,
) -> io::Result<()> {
    let fd = open(root, target)?;
    let at = format!("/proc/self/fd/{}", fd.as_raw_fd());
    super::mount::mount(src, Path::new(&at), fstype, flags, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("podinit-beneath-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("root")).unwrap();
        std::fs::create_dir_all(d.join("outside")).unwrap();
        d
    }

    #[test]
    fn nothing_is_made_through_a_link_that_leads_out() {
        let d = scratch("link");
        let root = d.join("root");
        std::os::unix::fs::symlink(d.join("outside"), root.join("vol")).unwrap();
        let e = ensure_dir(&root, &root.join("vol/x")).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOTDIR), "{e}");
        let e = create_file(&root, &root.join("vol/f")).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOTDIR), "{e}");
        std::os::unix::fs::symlink(d.join("outside/g"), root.join("g")).unwrap();
        assert!(create_file(&root, &root.join("g")).is_err());
        assert!(open(&root, &root.join("g")).is_err());
        assert!(std::fs::read_dir(d.join("outside"))
            .unwrap()
            .next()
            .is_none());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn directories_and_files_are_made_below_the_root() {
        let d = scratch("make");
        let root = d.join("root");
        ensure_dir(&root, &root.join("a/b")).unwrap();
        create_file(&root, &root.join("c/d/f")).unwrap();
        assert!(root.join("a/b").is_dir());
        assert!(root.join("c/d/f").is_file());
        assert!(open(&root, &root.join("c/d/f")).is_ok());
        assert!(components(&root, &d.join("outside")).is_err());
        assert!(components(&root, &root.join("a/../b")).is_err());
        std::fs::remove_dir_all(&d).unwrap();
    }
}
