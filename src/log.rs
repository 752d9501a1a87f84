//! podinit's own log lines, on stderr: `podinit: <message>` or, with `--log-format json`,
//! one JSON object a line.

use std::sync::atomic::{AtomicBool, Ordering};

static JSON: AtomicBool = AtomicBool::new(false);
static QUIET: AtomicBool = AtomicBool::new(false);
static VERBOSE: AtomicBool = AtomicBool::new(false);

pub fn set_json(on: bool) {
    JSON.store(on, Ordering::Relaxed);
}

/// `run --quiet`: no line per event, no pull progress; warnings and errors still.
pub fn set_quiet(on: bool) {
    QUIET.store(on, Ordering::Relaxed);
}

pub fn quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

/// `run --verbose`: notices said once per machine are said every time.
pub fn set_verbose(on: bool) {
    VERBOSE.store(on, Ordering::Relaxed);
}

pub fn verbose() -> bool {
    VERBOSE.load(Ordering::Relaxed)
}

/// One of the pod's events as it happens, as kubelet logs them: `Normal` ones as info,
/// `Warning` ones as warnings, a repeat with its count; none with `--quiet`.
pub fn event(warning: bool, reason: &str, message: &str, count: i32) {
    if quiet() {
        return;
    }
    let mut msg = format!("{reason}: {message}");
    if count > 1 {
        msg.push_str(&format!(" (x{count})"));
    }
    // Room is kept in a pipe for the lines that follow (warnings, errors, the pod's end).
    write_line(
        &format_line(if warning { "warning" } else { "info" }, &msg),
        RESERVE,
    );
}

/// What event lines leave free in a stderr pipe nobody reads.
const RESERVE: usize = 16 << 10;

/// One line to stderr; to a pipe, without waiting: dropped if the pipe has less than
/// `reserve` bytes free after it.
fn write_line(line: &str, reserve: usize) {
    let mut line = line.to_string();
    line.push('\n');
    let Some(mut pipe) = pipe_without_waiting() else {
        eprint!("{line}");
        return;
    };
    if reserve > 0
        && crate::sys::fd::pipe_free(std::os::fd::AsFd::as_fd(pipe))
            .is_some_and(|free| free < line.len() + reserve)
    {
        return;
    }
    // One write: a line of up to PIPE_BUF bytes goes in whole or not at all.
    let _ = std::io::Write::write(&mut pipe, line.as_bytes());
}

/// When stderr is a pipe: a descriptor of its own on that pipe that never waits, so that
/// the pod never waits on whoever reads (or does not read) our stderr. A line a full pipe
/// cannot take is dropped (an event stays in `podinit events`). Not for other files: a
/// file reopened would lose its `O_APPEND`.
fn pipe_without_waiting() -> Option<&'static std::fs::File> {
    static PIPE: std::sync::OnceLock<Option<std::fs::File>> = std::sync::OnceLock::new();
    PIPE.get_or_init(|| reopen_pipe_nonblocking(2)).as_ref()
}

/// `fd` opened anew without waiting, if it is a pipe.
fn reopen_pipe_nonblocking(fd: i32) -> Option<std::fs::File> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let path = format!("/proc/self/fd/{fd}");
    if !std::fs::metadata(&path).ok()?.file_type().is_fifo() {
        return None;
    }
    std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(&path)
        .ok()
}

fn emit(level: &str, msg: &str) {
    write_line(&format_line(level, msg), 0);
}

/// `podinit: [level: ]msg`, or one JSON object with `--log-format json`.
fn format_line(level: &str, msg: &str) -> String {
    if JSON.load(Ordering::Relaxed) {
        serde_json::json!({
            "time": crate::util::rfc3339_nanos(crate::util::now_unix_nanos()),
            "level": level,
            "msg": msg,
        })
        .to_string()
    } else if level == "info" {
        format!("podinit: {msg}")
    } else {
        format!("podinit: {level}: {msg}")
    }
}

pub fn info(msg: &str) {
    emit("info", msg);
}
pub fn warn(msg: &str) {
    emit("warning", msg);
}
pub fn error(msg: &str) {
    emit("error", msg);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn free_room_of_a_pipe() {
        let (_r, w) = nix::unistd::pipe().unwrap();
        let p = reopen_pipe_nonblocking(w.as_raw_fd()).unwrap();
        let empty = crate::sys::fd::pipe_free(std::os::fd::AsFd::as_fd(&p)).unwrap();
        nix::unistd::write(&w, &[b'x'; 1000]).unwrap();
        assert_eq!(
            crate::sys::fd::pipe_free(std::os::fd::AsFd::as_fd(&p)),
            Some(empty - 1000)
        );
    }

    #[test]
    fn a_pipe_nobody_reads_takes_lines_until_full_then_refuses_without_waiting() {
        let (_r, w) = nix::unistd::pipe().unwrap();
        let mut p = reopen_pipe_nonblocking(w.as_raw_fd()).expect("a pipe");
        let line = [b'x'; 100];
        let mut taken = 0;
        loop {
            match std::io::Write::write(&mut p, &line) {
                Ok(n) => taken += n,
                Err(e) => {
                    assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock);
                    break;
                }
            }
            assert!(taken < 10 << 20, "a pipe that never fills");
        }
        assert!(taken > 0);
        let f = std::fs::File::open("/proc/self/status").unwrap();
        assert!(
            reopen_pipe_nonblocking(f.as_raw_fd()).is_none(),
            "not a pipe"
        );
    }
}
