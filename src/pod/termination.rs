//! How a run's end is reported: the exit code as Kubernetes shows it, and the termination
//! message (kubelet's `terminationMessagePath` and `FallbackToLogsOnError` rules).

use super::state::exit_code_succeeded;

/// At most this much of the termination-message file is read: its last 4096 bytes.
pub const MESSAGE_MAX_BYTES: u64 = 4096;
/// `FallbackToLogsOnError`: the last 80 lines of the log, at most 2048 bytes.
pub const FALLBACK_LINES: usize = 80;
pub const FALLBACK_BYTES: usize = 2048;

/// The exit code Kubernetes reports for wait status `status` (128 + signal for a process
/// killed by a signal), and the signal.
pub fn exit_code(status: i32) -> (i32, Option<i32>) {
    if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        (128 + sig, Some(sig))
    } else {
        (libc::WEXITSTATUS(status), None)
    }
}

/// The termination message: the file's text if it has any; else, under
/// `FallbackToLogsOnError` and only for a failed run, the log's tail (`log_tail` is read
/// only then).
pub fn message(
    from_file: String,
    policy: Option<&str>,
    exit_code: i32,
    log_tail: impl FnOnce() -> String,
) -> Option<String> {
    if !from_file.is_empty() {
        return Some(from_file);
    }
    let fallback = policy == Some("FallbackToLogsOnError");
    if fallback && !exit_code_succeeded(exit_code) {
        let text = log_tail();
        if !text.is_empty() {
            return Some(text);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_status_decoding() {
        // exit(3): status = 3 << 8; killed by SIGKILL: status = 9.
        assert_eq!(exit_code(3 << 8), (3, None));
        assert_eq!(exit_code(9), (137, Some(9)));
        assert_eq!(exit_code(0), (0, None));
        assert_eq!(exit_code(15), (143, Some(15)));
    }

    #[test]
    fn the_file_wins_and_the_log_is_a_fallback_for_failures_only() {
        let fb = Some("FallbackToLogsOnError");
        let tail = || "last lines".to_string();
        assert_eq!(message("msg".into(), fb, 1, tail).as_deref(), Some("msg"));
        assert_eq!(
            message(String::new(), fb, 1, tail).as_deref(),
            Some("last lines")
        );
        assert_eq!(message(String::new(), fb, 0, || unreachable!()), None);
        let policy = Some("File");
        assert_eq!(message(String::new(), policy, 1, || unreachable!()), None);
        assert_eq!(message(String::new(), fb, 2, String::new), None);
    }
}
