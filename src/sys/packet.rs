//! Messages on a `SOCK_SEQPACKET` pair, as a container's creator and its child talk: one
//! `send` is one `recv`, whole.

use std::io;
use std::os::fd::RawFd;

/// Send `msg` as one message; no SIGPIPE when the peer has gone (EPIPE instead).
pub fn send(fd: RawFd, msg: &[u8]) -> io::Result<()> {
    // SAFETY: send from a live buffer of its own length.
    let n = unsafe { libc::send(fd, msg.as_ptr().cast(), msg.len(), libc::MSG_NOSIGNAL) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// One message of at most `max` bytes; empty when the peer has gone.
pub fn recv(fd: RawFd, max: usize) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; max];
    loop {
        // SAFETY: recv into a live buffer of the given length.
        let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        buf.truncate(n as usize);
        return Ok(buf);
    }
}
