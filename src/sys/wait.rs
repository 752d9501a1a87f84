//! Collecting a child's exit as its raw wait status (`WIFEXITED`, `WTERMSIG` and the
//! rest read it), which the callers judge themselves.

/// One child that has ended, without blocking: its pid and raw wait status, None when no
/// child has ended (or there is none). Every kind of child is collected (`__WALL`).
pub fn reap_any() -> Option<(i32, i32)> {
    let mut status = 0;
    // SAFETY: waitpid with a valid pointer to a status we own.
    let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG | libc::__WALL) };
    (pid > 0).then_some((pid, status))
}

/// Wait for our child `pid` to end: its raw wait status, None if it cannot be waited for
/// (it is not our child, or was collected already). An interrupted wait is resumed.
pub fn wait_child(pid: i32) -> Option<i32> {
    loop {
        let mut status = 0;
        // SAFETY: waitpid on one pid with a valid pointer to a status we own.
        let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
        if rc == pid {
            return Some(status);
        }
        if rc < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return None;
        }
    }
}
