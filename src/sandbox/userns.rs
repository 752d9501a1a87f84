//! A pod's user namespace (`hostUsers: false`): its block of host ids, allocated on the
//! node so that no two podinit pods share one, and the namespace itself with the network,
//! IPC and UTS namespaces it owns. The rules (kubelet's range, the map) are in
//! `pod::userns`; the idmapped mounts in `sys::idmap`.

use std::fs;
use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::Error;
use crate::pod::userns::{id_map, Range};

/// Where the node's allocations are: one file a block, named by its first host id and
/// locked (flock) by the pod that has it. A lock dies with its holder, so the block of a
/// pod whose podinit was killed is free again.
pub const ALLOCATIONS: &str = "/run/podinit/userns";

/// The block of host ids a pod has, for as long as this is alive.
pub struct Block {
    pub base: u32,
    path: PathBuf,
    /// Holds the lock (close-on-exec: no container inherits it).
    file: nix::fcntl::Flock<fs::File>,
}

impl Block {
    /// The lowest free block of `range` (kubelet's choice), taken for `owner` (written in
    /// the file, for whoever looks).
    pub fn allocate(dir: &Path, range: Range, owner: &str) -> Result<Block, Error> {
        fs::create_dir_all(dir)
            .map_err(|e| Error::io(format_args!("creating {}", dir.display()), e))?;
        for base in range.blocks() {
            let path = dir.join(base.to_string());
            let file = fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .map_err(|e| Error::io(format_args!("opening {}", path.display()), e))?;
            match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
                Ok(locked) => {
                    // Released and unlinked by its last owner between our open and our
                    // lock: this inode is nobody's block any more; try the path again.
                    let same = fs::metadata(&path)
                        .ok()
                        .zip(locked.metadata().ok())
                        .is_some_and(|(a, b)| a.ino() == b.ino() && a.dev() == b.dev());
                    if !same {
                        return Block::allocate(dir, range, owner);
                    }
                    let mut file = locked;
                    let _ = file.set_len(0);
                    let _ = writeln!(*file, "{owner}");
                    return Ok(Block { base, path, file });
                }
                Err((_, nix::errno::Errno::EWOULDBLOCK)) => continue,
                Err((_, e)) => {
                    return Err(Error::sys(format_args!("locking {}", path.display()), e))
                }
            }
        }
        Err(Error::NoFreeBlock)
    }

    /// Give the block back: the file goes, then the lock.
    pub fn release(self) {
        let _ = fs::remove_file(&self.path);
        drop(self.file);
    }
}

/// The pod's namespaces: its user namespace and those it owns.
pub struct PodUserns {
    pub base: u32,
    pub user: OwnedFd,
    pub net: OwnedFd,
    pub ipc: OwnedFd,
    pub uts: OwnedFd,
}

impl PodUserns {
    pub fn user_fd(&self) -> BorrowedFd<'_> {
        self.user.as_fd()
    }
}

/// Make the user namespace of the block at `base` and, owned by it, a network, an IPC
/// and a UTS namespace: a short-lived child makes them, we write its maps and keep its
/// namespaces.
pub fn create(base: u32) -> Result<PodUserns, Error> {
    let pipe = |e| Error::sys("pipe", e);
    let (go_r, go_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(pipe)?;
    let (done_r, done_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(pipe)?;
    // The child only makes system calls.
    let cloned = crate::sys::clone::fork(libc::CLONE_NEWUSER as u64, None)
        .map_err(|e| Error::io("creating the pod's user namespace (clone3)", e))?;
    let Some(child) = cloned else {
        drop((go_w, done_r));
        let mut b = [0u8; 1];
        // Our maps are written when the byte comes.
        let ok = nix::unistd::read(&go_r, &mut b) == Ok(1)
            && nix::sched::unshare(
                nix::sched::CloneFlags::CLONE_NEWNET
                    | nix::sched::CloneFlags::CLONE_NEWIPC
                    | nix::sched::CloneFlags::CLONE_NEWUTS,
            )
            .is_ok();
        let errno = if ok {
            0
        } else {
            nix::errno::Errno::last_raw() as u8
        };
        let _ = nix::unistd::write(&done_w, &[errno]);
        // Until the parent has our namespaces and kills us.
        let _ = nix::unistd::read(&go_r, &mut b);
        crate::sys::proc::exit_now(0)
    };
    drop((go_r, done_w));
    let made = (|| {
        // Through a private procfs, as every write of podinit's under /proc goes.
        for file in ["uid_map", "gid_map"] {
            let path = format!("/proc/{}/{file}", child.pid);
            crate::sys::procfs::write(Path::new(&path), id_map(base).as_bytes())
                .map_err(|e| Error::io(format_args!("writing {path}"), e))?;
        }
        nix::unistd::write(&go_w, b"g").map_err(pipe)?;
        let mut b = [0u8; 1];
        match nix::unistd::read(&done_r, &mut b) {
            Ok(1) if b[0] == 0 => {}
            Ok(1) => {
                return Err(Error::sys(
                    "creating the pod's network, IPC and UTS namespaces in its user namespace",
                    nix::errno::Errno::from_raw(b[0] as i32),
                ))
            }
            _ => return Err(Error::HelperExited),
        }
        let open = |name: &str| {
            let path = format!("/proc/{}/ns/{name}", child.pid);
            nix::fcntl::open(
                path.as_str(),
                nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_CLOEXEC,
                nix::sys::stat::Mode::empty(),
            )
            .map_err(|e| Error::sys(format_args!("opening {path}"), e))
        };
        Ok(PodUserns {
            base,
            user: open("user")?,
            net: open("net")?,
            ipc: open("ipc")?,
            uts: open("uts")?,
        })
    })();
    let _ = crate::sys::pidfd::send_signal(&child.pidfd, libc::SIGKILL);
    let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(child.pid), None);
    made
}

/// Join the pod's network, IPC and UTS namespaces (the supervisor, still host root:
/// it may, since they are owned by a user namespace its own owns).
pub fn join_owned(ns: &PodUserns) -> Result<(), Error> {
    for (fd, flag, what) in [
        (&ns.net, nix::sched::CloneFlags::CLONE_NEWNET, "network"),
        (&ns.ipc, nix::sched::CloneFlags::CLONE_NEWIPC, "IPC"),
        (&ns.uts, nix::sched::CloneFlags::CLONE_NEWUTS, "UTS"),
    ] {
        if let Err(e) = nix::sched::setns(fd, flag) {
            return Err(Error::io(
                format_args!("joining the pod's {what} namespace"),
                e.into(),
            ));
        }
    }
    Ok(())
}

/// The refusal when the kernel has no idmapped mounts where the pod needs them: each of
/// `dirs` (what, path) is tried, and a tmpfs when `tmpfs` (memory-backed emptyDirs).
pub fn probe(ns: &PodUserns, dirs: &[(&str, &Path)], tmpfs: bool) -> Result<(), Error> {
    let refusal = |what: &str, fs: &str, err: std::io::Error| Error::NoIdmap {
        fs: fs.to_string(),
        what: what.to_string(),
        err,
    };
    for (what, dir) in dirs {
        // A path not made yet (a hostPath of type DirectoryOrCreate): its filesystem is
        // its nearest existing parent's.
        let Some(existing) = dir.ancestors().find(|d| d.exists()) else {
            continue;
        };
        if let Err(e) = crate::sys::idmap::idmapped_tree(existing, ns.user_fd()) {
            let what = format!("{what} {}", dir.display());
            return Err(refusal(&what, &fs_name(existing), e));
        }
    }
    if tmpfs {
        crate::sys::idmap::tmpfs_takes_idmap(ns.user_fd())
            .map_err(|e| refusal("emptyDir medium Memory", "tmpfs", e))?;
    }
    Ok(())
}

/// The filesystem type of `dir`, by name for the common ones.
fn fs_name(dir: &Path) -> String {
    match nix::sys::statfs::statfs(dir) {
        Ok(st) => {
            let t = st.filesystem_type().0;
            match t {
                0x0102_1994 => "tmpfs".into(),
                0xEF53 => "ext4".into(),
                0x5846_5342 => "xfs".into(),
                0x9123_683E => "btrfs".into(),
                0x794C_7630 => "overlayfs".into(),
                _ => format!("a filesystem of type {t:#x}"),
            }
        }
        Err(_) => "its filesystem".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// flock locks belong to open files: a second open in this process conflicts as
    /// another podinit's would.
    #[test]
    fn blocks_are_taken_lowest_first_given_back_and_taken_again_when_stale() {
        let dir =
            std::env::temp_dir().join(format!("podinit-userns-{}", crate::util::random_hex(4)));
        let range = Range {
            first: 65536,
            count: 3 * 65536,
        };
        let a = Block::allocate(&dir, range, "ns/a").unwrap();
        let b = Block::allocate(&dir, range, "ns/b").unwrap();
        assert_eq!((a.base, b.base), (65536, 131072));
        assert_eq!(fs::read_to_string(dir.join("65536")).unwrap(), "ns/a\n");
        a.release();
        assert!(!dir.join("65536").exists());
        let c = Block::allocate(&dir, range, "ns/c").unwrap();
        assert_eq!(c.base, 65536);
        // A pod that died holding 196608: its file is left, unlocked.
        fs::write(dir.join("196608"), "ns/dead\n").unwrap();
        let d = Block::allocate(&dir, range, "ns/d").unwrap();
        assert_eq!(d.base, 196608);
        assert_eq!(fs::read_to_string(dir.join("196608")).unwrap(), "ns/d\n");
        let e = Block::allocate(&dir, range, "ns/e").err().unwrap();
        assert!(matches!(e, Error::NoFreeBlock), "{e}");
        assert_eq!(
            e.to_string(),
            "could not find an empty slot to allocate a user namespace"
        );
        for x in [b, c, d] {
            x.release();
        }
        fs::remove_dir(&dir).unwrap();
    }
}
