//! A network namespace: loopback up, and the addresses it has (a pod's `podIP`s).

use std::io;

/// Bring `lo` up in the current network namespace (a new namespace starts with it down).
pub fn loopback_up() -> io::Result<()> {
    // SAFETY: a plain socket used only for the SIOCGIFFLAGS/SIOCSIFFLAGS ioctls on a
    // zeroed, NUL-terminated ifreq; the fd is closed before returning.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut req: libc::ifreq = std::mem::zeroed();
        for (i, b) in b"lo\0".iter().enumerate() {
            req.ifr_name[i] = *b as libc::c_char;
        }
        let mut rc = libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut req);
        if rc == 0 {
            req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
            rc = libc::ioctl(fd, libc::SIOCSIFFLAGS, &req);
        }
        let err = io::Error::last_os_error();
        libc::close(fd);
        if rc != 0 {
            return Err(io::Error::new(err.kind(), format!("bringing lo up: {err}")));
        }
    }
    Ok(())
}

/// Non-loopback addresses of the current network namespace, IPv4 first.
pub fn pod_ips() -> Vec<String> {
    let Ok(addrs) = nix::ifaddrs::getifaddrs() else {
        return Vec::new();
    };
    let mut v4 = Vec::new();
    let mut v6 = Vec::new();
    for a in addrs {
        let Some(addr) = a.address else { continue };
        if let Some(s) = addr.as_sockaddr_in() {
            let ip = s.ip();
            if !ip.is_loopback() {
                v4.push(ip.to_string());
            }
        } else if let Some(s) = addr.as_sockaddr_in6() {
            let ip = s.ip();
            if !ip.is_loopback() && (ip.segments()[0] & 0xffc0) != 0xfe80 {
                v6.push(ip.to_string());
            }
        }
    }
    v4.dedup();
    v6.dedup();
    v4.extend(v6);
    v4
}
