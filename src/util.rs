//! Small helpers shared across modules: randomness, atomic files, directories, wall-clock
//! formatting. Kernel primitives are in `sys`.

use std::fs;
use std::io::{self, Write};
use std::path::Path;

pub use crate::sys::proc::random_bytes;

/// Lower-case hex of random bytes: container IDs (`podinit://<64 hex>`).
pub fn random_hex(bytes: usize) -> String {
    // getrandom can only fail on a kernel without it (before 3.17); fall back on time and
    // pid so IDs stay unique rather than failing a container start over it.
    let raw = random_bytes(bytes).unwrap_or_else(|_| {
        let seed = (std::process::id() as u128) << 64 | now_unix_nanos() as u128;
        (0..bytes)
            .map(|i| (seed >> ((i % 16) * 8)) as u8 ^ i as u8)
            .collect()
    });
    raw.iter().map(|b| format!("{b:02x}")).collect()
}

/// Write `data` to `path` atomically: a temporary file in the same directory, fsync-free
/// (status is rewritten often; a crash loses at most the last update), then rename.
pub fn write_atomic(path: &Path, data: &[u8]) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp"));
    // A write can fail half-way (ENOSPC, ENOMEM on a full tmpfs or memory cgroup): no
    // half-written file is left behind.
    fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(data))
        .and_then(|()| fs::rename(&tmp, path))
        .inspect_err(|_| {
            let _ = fs::remove_file(&tmp);
        })
}

/// Wall-clock nanoseconds since the Unix epoch.
pub fn now_unix_nanos() -> i128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i128)
        .unwrap_or(0)
}

/// How much of the second an RFC 3339 time shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fraction {
    /// Whole seconds: a Kubernetes `Time`, logrus's lines.
    Whole,
    /// Nine digits: the CRI log format's timestamp.
    Nanos,
    /// Go's RFC3339Nano: the nanoseconds without their trailing zeros (runc's `created`).
    Trimmed,
}

/// The one RFC 3339 formatter: `unix_nanos` since the epoch, in UTC.
pub fn rfc3339(unix_nanos: i128, fraction: Fraction) -> String {
    use k8s_openapi::jiff::Timestamp;
    if fraction == Fraction::Whole {
        let secs = unix_nanos.div_euclid(1_000_000_000) as i64;
        let ts = Timestamp::from_second(secs).unwrap_or(Timestamp::UNIX_EPOCH);
        return format!("{ts:.0}");
    }
    let ts = Timestamp::from_nanosecond(unix_nanos).unwrap_or(Timestamp::UNIX_EPOCH);
    let s = format!("{ts:.9}");
    if fraction == Fraction::Nanos {
        return s;
    }
    match s.strip_suffix('Z').and_then(|t| t.split_once('.')) {
        Some((whole, frac)) => {
            let frac = frac.trim_end_matches('0');
            if frac.is_empty() {
                format!("{whole}Z")
            } else {
                format!("{whole}.{frac}Z")
            }
        }
        None => s,
    }
}

/// RFC 3339 with nanoseconds, UTC (the CRI log format's timestamp).
pub fn rfc3339_nanos(unix_nanos: i128) -> String {
    rfc3339(unix_nanos, Fraction::Nanos)
}

/// `create_dir_all` for the common case in one syscall: mkdir, the parents only when
/// missing, an existing directory accepted (create_dir_all stats before every mkdir).
pub fn ensure_dir(path: &Path) -> io::Result<()> {
    match std::fs::create_dir(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => std::fs::create_dir_all(path),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && path.is_dir() => Ok(()),
        r => r,
    }
}

/// `s` with each `marker` followed by `digits` digits in `radix` replaced by that byte
/// (mountinfo's `\040`, a URL's `%20`); anything else is kept as written.
pub fn unescape_codes(s: &str, marker: u8, digits: usize, radix: u32) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == marker && i + digits < b.len() {
            if let Some(v) = s
                .get(i + 1..i + 1 + digits)
                .and_then(|d| u8::from_str_radix(d, radix).ok())
            {
                out.push(v);
                i += 1 + digits;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaped_bytes_in_either_notation() {
        assert_eq!(unescape_codes("u%40x%2", b'%', 2, 16), "u@x%2");
        assert_eq!(unescape_codes(r"/a\040b\9", b'\\', 3, 8), "/a b\\9");
        assert_eq!(unescape_codes("%zz", b'%', 2, 16), "%zz");
    }

    #[test]
    fn hex_ids_have_the_asked_length_and_differ() {
        let a = random_hex(32);
        let b = random_hex(32);
        assert_eq!(a.len(), 64);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }

    #[test]
    fn times_as_go_prints_them() {
        let go = |n| rfc3339(n, Fraction::Trimmed);
        assert_eq!(go(1_500_000_000), "1970-01-01T00:00:01.5Z");
        assert_eq!(go(2_000_000_000), "1970-01-01T00:00:02Z");
        assert_eq!(go(123), "1970-01-01T00:00:00.000000123Z");
        let whole = |n| rfc3339(n, Fraction::Whole);
        assert_eq!(whole(1_767_323_045_999_999_999), "2026-01-02T03:04:05Z");
        assert_eq!(whole(0), "1970-01-01T00:00:00Z");
    }

    #[test]
    fn rfc3339_has_nanoseconds_and_utc() {
        assert_eq!(
            rfc3339_nanos(1_500_000_000_123_456_789),
            "2017-07-14T02:40:00.123456789Z"
        );
    }

    #[test]
    fn atomic_write_replaces_content() {
        let dir = std::env::temp_dir().join(format!("podinit-util-{}", random_hex(4)));
        fs::create_dir_all(&dir).unwrap();
        let p = dir.join("status.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert_eq!(
            fs::read_dir(&dir).unwrap().count(),
            1,
            "no temporary file left"
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}
