//! A pull's progress on a terminal, one style for `podinit images pull` and the puller of
//! `podinit run`: podman's (containers/image's) lines, `Copying blob 3f4d90098f5b 1.2MiB /
//! 2.1MiB` redrawn in place and `Copying blob 3f4d90098f5b done` once a blob is in, sizes in
//! binary units as its counters show them. Nothing is drawn off a terminal.

use super::registry::Progress;
use std::io::Write;
use std::time::{Duration, Instant};

/// At most this often a line in progress is redrawn.
const REDRAW: Duration = Duration::from_millis(100);

/// The progress of one pull on stderr.
pub struct ProgressLine {
    on: bool,
    drawn: Option<Instant>,
    /// A line in progress is on the screen, without its newline.
    open: bool,
}

impl ProgressLine {
    /// Drawn only when `on` and stderr is a terminal; it starts as podman's does.
    pub fn new(name: &str, on: bool) -> ProgressLine {
        use std::io::IsTerminal;
        let on = on && std::io::stderr().is_terminal();
        if on {
            say(&format!("Trying to pull {name}...\n"));
        }
        ProgressLine {
            on,
            drawn: None,
            open: false,
        }
    }

    pub fn show(&mut self, p: &Progress) {
        if !self.on {
            return;
        }
        let Some((text, done)) = line(p) else {
            return;
        };
        if !done && self.drawn.is_some_and(|t| t.elapsed() < REDRAW) {
            return;
        }
        self.drawn = Some(Instant::now());
        say(&format!("\r\x1b[K{text}{}", if done { "\n" } else { "" }));
        self.open = !done;
    }

    /// Clear a line left in progress (a pull that failed or ended between blobs).
    pub fn finish(&mut self) {
        if self.open {
            say("\r\x1b[K");
            self.open = false;
        }
    }
}

/// `text` on stderr in one write: stderr is unbuffered, and a line written piece by piece
/// is cut by the lines the supervisor writes to the same terminal meanwhile.
fn say(text: &str) {
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// The text for `p`, and whether it is a finished line (kept, with its newline); nothing
/// for the manifest's resolution, which podman does not show either.
pub fn line(p: &Progress) -> Option<(String, bool)> {
    Some(match p {
        Progress::Resolved { .. } => return None,
        Progress::Blob {
            digest,
            done,
            total,
        } if *total > 0 && done >= total => (format!("Copying blob {} done", short(digest)), true),
        // A size not known yet: what came so far.
        Progress::Blob {
            digest,
            done,
            total,
        } if *total == 0 => (
            format!("Copying blob {} {}", short(digest), size(*done)),
            false,
        ),
        Progress::Blob {
            digest,
            done,
            total,
        } => (
            format!(
                "Copying blob {} {} / {}",
                short(digest),
                size(*done),
                size(*total)
            ),
            false,
        ),
    })
}

/// The first 12 hex digits, as podman names blobs.
fn short(digest: &str) -> &str {
    let hex = digest.split_once(':').map_or(digest, |(_, h)| h);
    &hex[..hex.len().min(12)]
}

/// Binary units with one decimal, as containers/image's counters (`1.2MiB`).
pub fn size(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n}B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1}{}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blob(done: u64, total: u64) -> Progress {
        Progress::Blob {
            digest: format!("sha256:{}", "3f4d90098f5b".repeat(5)),
            done,
            total,
        }
    }

    #[test]
    fn lines_as_podman_shows_them() {
        assert_eq!(
            line(&blob(1258291, 2202010)),
            Some(("Copying blob 3f4d90098f5b 1.2MiB / 2.1MiB".into(), false))
        );
        assert_eq!(
            line(&blob(7, 7)),
            Some(("Copying blob 3f4d90098f5b done".into(), true))
        );
        // Never a size of nothing.
        assert_eq!(
            line(&blob(0, 0)),
            Some(("Copying blob 3f4d90098f5b 0B".into(), false))
        );
        let resolved = Progress::Resolved {
            digest: "sha256:abcdef0123456789".into(),
        };
        assert_eq!(line(&resolved), None);
    }

    #[test]
    fn binary_units() {
        assert_eq!(size(512), "512B");
        assert_eq!(size(1536), "1.5KiB");
        assert_eq!(size(3 * 1024 * 1024 / 2), "1.5MiB");
        assert_eq!(size(5 << 30), "5.0GiB");
    }
}
