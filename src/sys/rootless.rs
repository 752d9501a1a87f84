//! Running without root: the user's subordinate id ranges (`/etc/subuid`, `/etc/subgid`),
//! the maps built from them as rootless podman builds its own (the user's id → 0, the
//! ranges from 1), and entering a user namespace mapped so, through the setuid helpers
//! `newuidmap`/`newgidmap` (shadow's `uidmap` package) or, without ranges, the user's own
//! id alone (docs/interface.md §Without root).

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// A block of subordinate ids given to a user: `start`, `count` ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdRange {
    pub start: u32,
    pub count: u32,
}

/// One line of a `uid_map` or `gid_map`: ids `inside..inside+count` are `outside..`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapLine {
    pub inside: u32,
    pub outside: u32,
    pub count: u32,
}

impl fmt::Display for MapLine {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{} {} {}", self.inside, self.outside, self.count)
    }
}

/// The ranges of `/etc/subuid` (or subgid) text that belong to the user named `name`
/// with id `id`: shadow's lookup takes an entry by name or by number. Comments, blank
/// and malformed lines are skipped, as shadow skips them.
pub fn parse_subids(text: &str, name: &str, id: u32) -> Vec<IdRange> {
    let id = id.to_string();
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| {
            let mut f = l.trim().split(':');
            let (owner, start, count) = (f.next()?, f.next()?, f.next()?);
            if f.next().is_some() || (owner != name && owner != id) {
                return None;
            }
            let range = IdRange {
                start: start.parse().ok()?,
                count: count.parse().ok()?,
            };
            (range.count > 0).then_some(range)
        })
        .collect()
}

/// The map of a rootless namespace: `own` → 0, then each range in turn from 1, as
/// rootless podman maps them. A range holding `own` itself is left out, since an id
/// may be mapped once only.
pub fn mapping(own: u32, ranges: &[IdRange]) -> Vec<MapLine> {
    let mut lines = vec![MapLine {
        inside: 0,
        outside: own,
        count: 1,
    }];
    let mut next = 1u32;
    for r in ranges {
        let end = u64::from(r.start) + u64::from(r.count);
        if (u64::from(r.start)..end).contains(&u64::from(own)) {
            continue;
        }
        lines.push(MapLine {
            inside: next,
            outside: r.start,
            count: r.count,
        });
        next = next.saturating_add(r.count);
    }
    lines
}

/// Ids inside a map: how many the namespace has (0 to this, exclusive).
pub fn mapped_count(map: &[MapLine]) -> u64 {
    map.iter()
        .map(|l| u64::from(l.inside) + u64::from(l.count))
        .max()
        .unwrap_or(0)
}

/// Which of `uid` and `gid` the user namespace this process is in does not map, said for
/// an error about a file owned by them; None when both are mapped or the maps are unread.
pub fn unmapped(uid: u32, gid: u32) -> Option<String> {
    let read = |f: &str| std::fs::read_to_string(format!("/proc/self/{f}")).ok();
    unmapped_in(&read("uid_map")?, &read("gid_map")?, uid, gid)
}

/// [`unmapped`] over the maps' text.
pub fn unmapped_in(uid_map: &str, gid_map: &str, uid: u32, gid: u32) -> Option<String> {
    let (kind, id, map, file) = if outside_of(uid_map, uid).is_none() {
        ("uid", uid, uid_map, "/etc/subuid")
    } else if outside_of(gid_map, gid).is_none() {
        ("gid", gid, gid_map, "/etc/subgid")
    } else {
        return None;
    };
    let count = map
        .lines()
        .filter_map(|l| {
            let f: Vec<u64> = l
                .split_whitespace()
                .filter_map(|n| n.parse().ok())
                .collect();
            let [i, _, n] = f[..] else { return None };
            Some(i + n)
        })
        .max()
        .unwrap_or(0);
    Some(format!(
        "owned by {kind} {id}, which the user's namespace does not map (its {kind}s are 0 to {}: \
         the user's own and its {file} ranges); give the user a larger range in {file}",
        count.saturating_sub(1)
    ))
}

/// Whether `map` is the identity map of the initial user namespace.
pub fn is_initial_map(text: &str) -> bool {
    let f: Vec<&str> = text.split_whitespace().collect();
    f == ["0", "0", "4294967295"]
}

/// The user podinit runs for, as seen outside the namespace it made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outside {
    pub uid: u32,
    pub gid: u32,
    /// The maps written; a single line when the user has no subordinate ranges.
    pub uid_map: Vec<MapLine>,
    pub gid_map: Vec<MapLine>,
}

static ENTERED: OnceLock<Outside> = OnceLock::new();

/// The namespaces [`enter`] makes: the mount namespace is made after the user namespace,
/// and owned by it.
const USER_AND_MOUNT: nix::sched::CloneFlags =
    nix::sched::CloneFlags::CLONE_NEWUSER.union(nix::sched::CloneFlags::CLONE_NEWNS);

/// The user and maps of the namespace this process made with [`enter`], if it did (a
/// forked child inherits the answer).
pub fn entered() -> Option<&'static Outside> {
    ENTERED.get()
}

/// Whether podinit runs without root: not root outside a user namespace, or in a user
/// namespace it made or was given that does not map all host ids (runc's `--rootless=auto`).
pub fn rootless() -> bool {
    if entered().is_some() || !nix::unistd::geteuid().is_root() {
        return true;
    }
    // A namespace is never left: read once.
    static GIVEN: OnceLock<bool> = OnceLock::new();
    *GIVEN.get_or_init(|| {
        std::fs::read_to_string("/proc/self/uid_map").is_ok_and(|t| !is_initial_map(&t))
    })
}

/// The user's id outside: the one that made the namespace, else the one the namespace
/// podinit is in maps its effective id to. A podinit that ran itself again sealed
/// (`sys::exe`) inside the namespace it made has forgotten making it; the map has not.
pub fn user_id() -> u32 {
    if let Some(o) = entered() {
        return o.uid;
    }
    let me = nix::unistd::geteuid().as_raw();
    std::fs::read_to_string("/proc/self/uid_map")
        .ok()
        .and_then(|t| outside_of(&t, me))
        .unwrap_or(me)
}

/// The id outside that `inside` is, by the text of a `uid_map` or `gid_map` read in the
/// namespace; None when the map leaves it out.
pub fn outside_of(map: &str, inside: u32) -> Option<u32> {
    map.lines().find_map(|l| {
        let f: Vec<u64> = l
            .split_whitespace()
            .filter_map(|n| n.parse().ok())
            .collect();
        let [i, o, n] = f[..] else { return None };
        let id = u64::from(inside);
        (i..i + n)
            .contains(&id)
            .then(|| u32::try_from(o + (id - i)).ok())
            .flatten()
    })
}

/// The prefix of overlayfs's own attributes (an opaque directory's `opaque`): without root
/// `user.overlay.`, which overlayfs reads when mounted with `userxattr` (Linux 5.11), since
/// `trusted.*` needs CAP_SYS_ADMIN over the host; as root `trusted.overlay.`.
pub fn overlay_xattrs() -> &'static str {
    if rootless() {
        "user.overlay."
    } else {
        "trusted.overlay."
    }
}

/// Where a rootless podinit keeps its pods' state and sockets: `$XDG_RUNTIME_DIR/podinit`,
/// else `/tmp/podinit-<uid>` (as rootless podman falls back to `/tmp/podman-run-<uid>`).
pub fn runtime_dir() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d).join("podinit"),
        None => PathBuf::from(format!("/tmp/podinit-{}", user_id())),
    }
}

/// A rootless podinit's image store: `$XDG_DATA_HOME/podinit/images`, else
/// `~/.local/share/podinit/images` (the XDG base directory defaults).
pub fn images_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("XDG_DATA_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(d).join("podinit/images");
    }
    let home = std::env::var_os("HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(user_id()))
                .ok()
                .flatten()
                .map(|u| u.dir)
        })
        .unwrap_or_else(|| PathBuf::from("/"));
    home.join(".local/share/podinit/images")
}

/// Make `dir` (mode 0700) if it is missing, and refuse one that another user owns or
/// others may enter: the state under it holds the pods' sockets.
pub fn private_dir(dir: &std::path::Path) -> super::Result<()> {
    use super::Error;
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    match std::fs::DirBuilder::new()
        .mode(0o700)
        .recursive(false)
        .create(dir)
    {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            std::fs::DirBuilder::new()
                .mode(0o700)
                .recursive(true)
                .create(dir)
                .map_err(|e| Error::file("making", dir, e))?;
            return Ok(());
        }
        Err(e) => return Err(Error::file("making", dir, e)),
    }
    let md = std::fs::symlink_metadata(dir).map_err(|e| Error::io(dir.display(), e))?;
    let me = nix::unistd::geteuid().as_raw();
    if !md.is_dir() || md.uid() != me || md.mode() & 0o077 != 0 {
        return Err(Error::Invalid(format!(
            "{} must be a directory of the user's own with mode 0700 (it is owned by {} with mode {:o})",
            dir.display(),
            md.uid(),
            md.mode() & 0o7777
        )));
    }
    Ok(())
}

/// Why the namespace could not be entered.
#[derive(Debug)]
pub enum EnterError {
    /// unshare(CLONE_NEWUSER|CLONE_NEWNS) was refused (user namespaces disabled, limits).
    Unshare(nix::errno::Errno),
    /// A helper failed or is missing: which, with what it said.
    Helper(String),
    /// Writing a map or setgroups of the process itself.
    Map(PathBuf, io::Error),
    /// fork, pipe, or /proc read.
    Setup(String),
}

impl fmt::Display for EnterError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            EnterError::Unshare(e) => write!(
                f,
                "making a user namespace: unshare(CLONE_NEWUSER|CLONE_NEWNS): {e} \
                 (are unprivileged user namespaces enabled?)"
            ),
            EnterError::Helper(e) => write!(f, "mapping the user namespace: {e}"),
            EnterError::Map(p, e) => write!(f, "writing {}: {e}", p.display()),
            EnterError::Setup(e) => write!(f, "making a user namespace: {e}"),
        }
    }
}

/// Move this (single-threaded) process into a new user namespace with `uid_map` and
/// `gid_map`, where it is root with every capability, and into a mount namespace that
/// namespace owns, as podman's rootless pause process holds both: there podinit may mount,
/// which running its binary sealed needs (`sys::exe`). A map of more than the caller's own
/// id is written by `newuidmap`/`newgidmap`, run by a child left outside, as podman does;
/// a single line is written by the process itself (with `setgroups` denied first, which
/// the kernel requires of an unprivileged gid map).
pub fn enter(
    uid: u32,
    gid: u32,
    uid_map: Vec<MapLine>,
    gid_map: Vec<MapLine>,
) -> Result<(), EnterError> {
    let helpers = uid_map.len() > 1 || gid_map.len() > 1;
    if !helpers {
        nix::sched::unshare(USER_AND_MOUNT).map_err(EnterError::Unshare)?;
        write_own("/proc/self/setgroups", "deny")?;
        write_own("/proc/self/uid_map", &format!("{}\n", uid_map[0]))?;
        write_own("/proc/self/gid_map", &format!("{}\n", gid_map[0]))?;
    } else {
        let pid = nix::unistd::getpid().as_raw();
        let (rd, wr) = nix::unistd::pipe().map_err(|e| EnterError::Setup(format!("pipe: {e}")))?;
        let (res_rd, res_wr) =
            nix::unistd::pipe().map_err(|e| EnterError::Setup(format!("pipe: {e}")))?;
        let child = super::clone::fork(0, None).map_err(|e| EnterError::Setup(e.to_string()))?;
        let Some(child) = child else {
            // The child: wait for the parent's unshare, map it, report one line, exit.
            drop(wr);
            drop(res_rd);
            let mut b = [0u8; 1];
            let ok = matches!(nix::unistd::read(&rd, &mut b), Ok(1));
            let out = if ok {
                run_helper("newuidmap", pid, &uid_map)
                    .and_then(|()| run_helper("newgidmap", pid, &gid_map))
            } else {
                Err(EnterError::Helper(
                    "the parent did not make its namespace".to_string(),
                ))
            };
            // The parent words it as a helper's failure: only what the helper said goes.
            let failed = out.is_err();
            let msg = match out {
                Ok(()) => String::new(),
                Err(EnterError::Helper(said)) => said,
                Err(e) => e.to_string(),
            };
            let _ = nix::unistd::write(&res_wr, msg.as_bytes());
            // SAFETY: _exit ends this forked child without running the parent's atexit
            // handlers or flushing its buffers twice.
            unsafe { libc::_exit(i32::from(failed)) }
        };
        drop(rd);
        drop(res_wr);
        let unshared = nix::sched::unshare(USER_AND_MOUNT);
        if unshared.is_ok() {
            let _ = nix::unistd::write(&wr, b"x");
        }
        drop(wr);
        let mut msg = Vec::new();
        let _ = io::Read::read_to_end(&mut std::fs::File::from(res_rd), &mut msg);
        let _ = super::wait::wait_child(child.pid);
        unshared.map_err(EnterError::Unshare)?;
        if !msg.is_empty() {
            return Err(EnterError::Helper(
                String::from_utf8_lossy(&msg).into_owned(),
            ));
        }
    }
    let _ = ENTERED.set(Outside {
        uid,
        gid,
        uid_map,
        gid_map,
    });
    Ok(())
}

/// Through a procfs handle (`procfs`), as every write of podinit's under /proc goes.
fn write_own(path: &str, text: &str) -> Result<(), EnterError> {
    super::procfs::write(Path::new(path), text.as_bytes())
        .map_err(|e| EnterError::Map(PathBuf::from(path), e))
}

/// `newuidmap PID inside outside count…`: its own message when it fails.
fn run_helper(helper: &str, pid: i32, map: &[MapLine]) -> Result<(), EnterError> {
    let mut cmd = Command::new(helper);
    cmd.arg(pid.to_string());
    for l in map {
        cmd.args([l.inside, l.outside, l.count].map(|n| n.to_string()));
    }
    let out = cmd.output().map_err(|e| {
        EnterError::Helper(format!("running {helper}: {e} (install shadow's uidmap package, or remove the user's /etc/subuid and /etc/subgid ranges)"))
    })?;
    if !out.status.success() {
        let said = String::from_utf8_lossy(&out.stderr);
        return Err(EnterError::Helper(format!(
            "{helper} failed ({}): {}",
            out.status,
            said.trim()
        )));
    }
    Ok(())
}

/// The subordinate ids of `id` in `file`: none when it does not
/// exist or does not list the user.
pub fn ranges_of(file: &str, name: &str, id: u32) -> Vec<IdRange> {
    std::fs::read_to_string(file)
        .map(|t| parse_subids(&t, name, id))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subids_by_name_and_number() {
        let t = "# comment\nalice:100000:65536\n1001:300000:1000\nbob:200000:65536\n\
                 alice:bad:1\nalice:500000:0\nalice:1:2:3\n";
        assert_eq!(
            parse_subids(t, "alice", 1001),
            vec![
                IdRange {
                    start: 100000,
                    count: 65536
                },
                IdRange {
                    start: 300000,
                    count: 1000
                }
            ]
        );
        assert!(parse_subids(t, "carol", 1002).is_empty());
    }

    #[test]
    fn own_id_first_then_ranges_from_one() {
        let r = [
            IdRange {
                start: 100000,
                count: 65536,
            },
            IdRange {
                start: 300000,
                count: 10,
            },
        ];
        let m = mapping(1000, &r);
        assert_eq!(
            m.iter().map(ToString::to_string).collect::<Vec<_>>(),
            ["0 1000 1", "1 100000 65536", "65537 300000 10"]
        );
        assert_eq!(mapped_count(&m), 65547);
        assert_eq!(
            mapping(1000, &[]),
            vec![MapLine {
                inside: 0,
                outside: 1000,
                count: 1
            }]
        );
    }

    #[test]
    fn a_range_holding_the_own_id_is_left_out() {
        let r = [IdRange {
            start: 900,
            count: 200,
        }];
        assert_eq!(mapping(1000, &r).len(), 1);
    }

    #[test]
    fn the_outside_id_of_an_inside_one() {
        let map = "         0       1000          1\n         1     100000      65536\n";
        assert_eq!(outside_of(map, 0), Some(1000));
        assert_eq!(outside_of(map, 1), Some(100000));
        assert_eq!(outside_of(map, 65536), Some(165535));
        assert_eq!(outside_of(map, 65537), None);
        assert_eq!(outside_of("0 0 4294967295\n", 0), Some(0));
    }

    #[test]
    fn an_unmapped_owner_is_named_with_the_ranges() {
        let uids = "0 1000 1\n1 100000 65536\n";
        let gids = "0 1000 1\n1 100000 1000\n";
        assert_eq!(unmapped_in(uids, gids, 65536, 1000), None);
        assert_eq!(
            unmapped_in(uids, gids, 70000, 0).as_deref(),
            Some(
                "owned by uid 70000, which the user's namespace does not map (its uids are \
                 0 to 65536: the user's own and its /etc/subuid ranges); give the user a \
                 larger range in /etc/subuid"
            )
        );
        assert!(unmapped_in(uids, gids, 0, 1001).unwrap().starts_with(
            "owned by gid 1001, which the user's namespace does not map (its gids are 0 to 1000: "
        ));
    }

    #[test]
    fn initial_map() {
        assert!(is_initial_map("         0          0 4294967295\n"));
        assert!(!is_initial_map("0 1000 1\n1 100000 65536\n"));
    }
}
