//! `podinit attach`: what the CRI decides when an attach session asks for streams, and when
//! its stdin ends (docs/semantics.md §Attach). Pure.

/// What becomes of an attach session whose client's stdin ended (containerd's CRI,
/// `containerIO.Attach`): with `stdinOnce` and no terminal, the container's stdin is
/// closed (it sees EOF) and the session goes on showing output until the container
/// stops; otherwise the container's stdin stays open for a later session and this
/// session ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StdinEnd {
    CloseContainerStdin,
    EndSession,
}

pub fn stdin_end(stdin_once: bool, tty: bool) -> StdinEnd {
    if stdin_once && !tty {
        StdinEnd::CloseContainerStdin
    } else {
        StdinEnd::EndSession
    }
}

/// The streams a session gets, as kubelet and kubectl settle them: input only when both
/// the client asks (`-i`) and the container has `stdin: true` (the CRI drops it
/// otherwise); a terminal whenever the container has one, whatever the client asked
/// (kubectl forces it: a terminal's output has no separate stderr).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Session {
    pub stdin: bool,
    pub tty: bool,
}

pub fn session(want_stdin: bool, container_stdin: bool, container_tty: bool) -> Session {
    Session {
        stdin: want_stdin && container_stdin,
        tty: container_tty,
    }
}

/// The line of the CRI's log for a line the container wrote: a terminal ends its lines
/// with `\r\n`, and the CRI's log writer (Go's `bufio.Reader.ReadLine`) drops the `\r`.
pub fn log_line(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stdin_once_closes_the_containers_stdin_only_without_a_terminal() {
        use StdinEnd::*;
        assert_eq!(stdin_end(true, false), CloseContainerStdin);
        assert_eq!(stdin_end(true, true), EndSession);
        assert_eq!(stdin_end(false, false), EndSession);
        assert_eq!(stdin_end(false, true), EndSession);
    }

    #[test]
    fn sessions_take_input_only_from_a_container_with_stdin() {
        assert_eq!(
            session(true, true, false),
            Session {
                stdin: true,
                tty: false
            }
        );
        assert!(!session(true, false, false).stdin);
        assert!(!session(false, true, true).stdin);
        assert!(session(false, true, true).tty);
    }

    #[test]
    fn terminal_lines_lose_their_carriage_return() {
        assert_eq!(log_line(b"/dev/pts/0\r"), b"/dev/pts/0");
        assert_eq!(log_line(b"a\rb"), b"a\rb");
        assert_eq!(log_line(b""), b"");
    }
}
