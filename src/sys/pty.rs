//! Pseudo-terminals: a container's terminal is made inside its own mount namespace, from
//! the `/dev/ptmx` of its own devpts (so that `tty` there names `/dev/pts/0`), and its
//! master travels back to the supervisor over a Unix socket, as runc's console socket does.
//! The child-side calls allocate nothing: they run in a vfork-like child.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// `TIOCGPTPEER`: open the slave of a master without a path lookup (Linux 4.13).
const TIOCGPTPEER: libc::c_ulong = 0x5441;

fn ok(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// Open a new terminal: its master and its slave, both close-on-exec, the slave unlocked.
pub fn open() -> io::Result<(RawFd, RawFd)> {
    let flags = libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC;
    // SAFETY: open with a static C string.
    let master = ok(unsafe { libc::open(c"/dev/ptmx".as_ptr(), flags) })?;
    let unlock: libc::c_int = 0;
    // SAFETY: ioctls on our master with the arguments the kernel expects.
    let slave = ok(unsafe { libc::ioctl(master, libc::TIOCSPTLCK, &unlock) })
        .and_then(|_| ok(unsafe { libc::ioctl(master, TIOCGPTPEER as _, flags) }));
    match slave {
        Ok(s) => Ok((master, s)),
        Err(e) => {
            // SAFETY: our own fd.
            unsafe { libc::close(master) };
            Err(e)
        }
    }
}

/// Make the terminal on `fd` this session leader's controlling terminal.
pub fn set_controlling(fd: RawFd) -> io::Result<()> {
    // SAFETY: an ioctl without memory arguments.
    ok(unsafe { libc::ioctl(fd, libc::TIOCSCTTY, 0) }).map(drop)
}

/// Send `fd` on the Unix socket `sock` (`SCM_RIGHTS`), with a one-byte message.
pub fn send_fd(sock: RawFd, fd: RawFd) -> io::Result<()> {
    let mut byte = [b'T'];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    // Room for one fd, aligned as cmsghdr wants.
    let mut space = [0u64; 4];
    // SAFETY: a zeroed msghdr is valid; the fields set point into live locals.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = space.as_mut_ptr().cast();
    // SAFETY: CMSG_SPACE is a pure computation.
    msg.msg_controllen = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as _;
    // SAFETY: the control buffer is large enough for one header and one fd.
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_RIGHTS;
        (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<RawFd>(), fd);
    }
    // SAFETY: sendmsg with the message built above.
    let n = unsafe { libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// One message from the (non-blocking) socket `sock`: its bytes and the fd it carried.
/// `None` when nothing is there (or the peer has gone).
pub fn recv_fd(sock: RawFd) -> io::Result<Option<(Vec<u8>, Option<OwnedFd>)>> {
    let mut buf = vec![0u8; 4096];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut space = [0u64; 4];
    // SAFETY: a zeroed msghdr is valid; the fields set point into live locals.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = space.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&space) as _;
    // SAFETY: recvmsg into the buffers above.
    let n = unsafe { libc::recvmsg(sock, &mut msg, libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::WouldBlock {
            Ok(None)
        } else {
            Err(e)
        };
    }
    let mut fd = None;
    // SAFETY: walking the control messages the kernel wrote into `space`.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let raw = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<RawFd>());
                fd = Some(OwnedFd::from_raw_fd(raw));
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    if n == 0 && fd.is_none() {
        return Ok(None);
    }
    buf.truncate(n as usize);
    Ok(Some((buf, fd)))
}

/// Set the window size of the terminal whose master (or slave) is `fd`: the foreground
/// process group gets SIGWINCH.
pub fn set_size(fd: RawFd, rows: u16, cols: u16) -> io::Result<()> {
    let ws = libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads a winsize we own.
    ok(unsafe { libc::ioctl(fd, libc::TIOCSWINSZ, &ws) }).map(drop)
}

/// The window size of the terminal on `fd` (rows, columns).
pub fn size(fd: RawFd) -> io::Result<(u16, u16)> {
    // SAFETY: a zeroed winsize is valid; TIOCGWINSZ fills it.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    ok(unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut ws) })?;
    Ok((ws.ws_row, ws.ws_col))
}
