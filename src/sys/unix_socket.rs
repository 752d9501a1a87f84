//! Unix socket addresses: a path longer than `sockaddr_un` holds; a peer's hang-up.

use std::fs;
use std::io;
use std::path::Path;

/// The longest path a `sockaddr_un` holds (108 bytes with the NUL).
const SUN_PATH_MAX: usize = 107;

/// A path that `bind` and `connect` accept for the Unix socket at `path`. One longer than
/// `sockaddr_un` holds (the default state dir of a pod with a long name) is reached through
/// an `O_PATH` descriptor of its directory, `/proc/self/fd/N/<name>`; keep the returned
/// file open while the path is used.
pub fn socket_path(path: &Path) -> io::Result<(Option<fs::File>, std::path::PathBuf)> {
    use std::os::unix::fs::OpenOptionsExt;
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Ok((None, path.to_path_buf()));
    };
    if path.as_os_str().len() <= SUN_PATH_MAX {
        return Ok((None, path.to_path_buf()));
    }
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let f = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(dir)?;
    use std::os::fd::AsRawFd;
    let short = Path::new(&format!("/proc/self/fd/{}", f.as_raw_fd())).join(name);
    Ok((Some(f), short))
}

/// Waits until the peer of connected socket `fd` hangs up (true), or `limit` passes: a
/// server's answer has reached a client that closes once answered.
pub fn wait_hangup(fd: std::os::fd::RawFd, limit: std::time::Duration) -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let deadline = std::time::Instant::now() + limit;
    // The socket is the caller's; it is only looked at here, never read or closed.
    let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
        let mut fds = [PollFd::new(
            fd,
            PollFlags::from_bits_retain(libc::POLLRDHUP),
        )];
        let ms = PollTimeout::from(left.as_millis().min(10_000) as u16);
        match poll(&mut fds, ms) {
            Ok(0) => return false,
            // Only hang-ups are asked for (POLLRDHUP, and POLLHUP, POLLERR and POLLNVAL
            // that poll always reports): any event means the peer is gone.
            Ok(_) => return true,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return true,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peers_hang_up_is_seen_and_a_live_peer_waited_for() {
        use std::os::fd::AsRawFd;
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let zero = std::time::Duration::ZERO;
        assert!(!wait_hangup(a.as_raw_fd(), zero), "a live peer");
        drop(b);
        assert!(wait_hangup(
            a.as_raw_fd(),
            std::time::Duration::from_secs(60)
        ));
    }

    #[test]
    fn a_long_socket_path_is_reached_through_its_directory() {
        let dir = std::env::temp_dir().join("x".repeat(120));
        fs::create_dir_all(&dir).unwrap();
        let sock = dir.join("s.sock");
        let (held, short) = socket_path(&sock).unwrap();
        assert!(
            held.is_some() && short.as_os_str().len() <= SUN_PATH_MAX,
            "{short:?}"
        );
        let l = std::os::unix::net::UnixListener::bind(&short).unwrap();
        assert!(sock.exists(), "the socket is made in the directory itself");
        let (_held, short) = socket_path(&sock).unwrap();
        std::os::unix::net::UnixStream::connect(&short).unwrap();
        drop(l);
        fs::remove_dir_all(&dir).unwrap();
        let (none, same) = socket_path(Path::new("/run/x.sock")).unwrap();
        assert!(none.is_none() && same == Path::new("/run/x.sock"));
    }
}
