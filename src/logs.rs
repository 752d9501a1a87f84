//! Container logs in the CRI format (`<RFC3339Nano> stdout|stderr F|P <line>`), one file
//! per run: `logs/<container>/<restartCount>.log`, rotated at 10 MiB to `.log.1` … `.log.4`
//! (5 files kept, as kubelet's `containerLogMaxFiles` default).

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

pub const ROTATE_BYTES: u64 = 10 << 20;
pub const KEEP_FILES: usize = 5;
/// A line longer than this is written in `P` (partial) pieces, as CRI runtimes do.
pub const MAX_LINE: usize = 16 << 10;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    fn as_str(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

/// The log file of one container run.
pub struct LogFile {
    path: PathBuf,
    file: fs::File,
    size: u64,
}

impl LogFile {
    pub fn path_for(logs_dir: &Path, container: &str, restart_count: u32) -> PathBuf {
        logs_dir
            .join(container)
            .join(format!("{restart_count}.log"))
    }

    pub fn create(path: PathBuf) -> io::Result<LogFile> {
        if let Some(d) = path.parent() {
            fs::create_dir_all(d)
                .map_err(|e| io::Error::new(e.kind(), format!("creating {}: {e}", d.display())))?;
        }
        let file = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| io::Error::new(e.kind(), format!("opening {}: {e}", path.display())))?;
        let size = file.metadata()?.len();
        Ok(LogFile { path, file, size })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Append one CRI record.
    pub fn record(&mut self, ts_nanos: i128, stream: Stream, partial: bool, line: &[u8]) {
        let mut rec = Vec::with_capacity(line.len() + 48);
        rec.extend_from_slice(crate::util::rfc3339_nanos(ts_nanos).as_bytes());
        rec.push(b' ');
        rec.extend_from_slice(stream.as_str().as_bytes());
        rec.extend_from_slice(if partial { b" P " } else { b" F " });
        rec.extend_from_slice(line);
        rec.push(b'\n');
        if self.size + rec.len() as u64 > ROTATE_BYTES && self.size > 0 {
            self.rotate();
        }
        // A full disk must not stop the pod; the record is dropped.
        if self.file.write_all(&rec).is_ok() {
            self.size += rec.len() as u64;
        }
    }

    fn rotate(&mut self) {
        let name = |n: usize| PathBuf::from(format!("{}.{n}", self.path.display()));
        let _ = fs::remove_file(name(KEEP_FILES - 1));
        for n in (1..KEEP_FILES - 1).rev() {
            let _ = fs::rename(name(n), name(n + 1));
        }
        let _ = fs::rename(&self.path, name(1));
        if let Ok(f) = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
        {
            self.file = f;
            self.size = 0;
        }
    }
}

/// kubelet's container garbage collection runs once a minute: an older instance's log
/// outlives the instance by up to this long.
pub const GC_PERIOD: std::time::Duration = std::time::Duration::from_secs(60);

/// Remove from a container's log directory the logs of runs before `first_kept`
/// (`<run>.log` and its rotations) not written to for `min_age`. kubelet keeps a
/// container's current and previous instance only (`--previous` reads the latter), so a
/// crash loop does not fill the disk with a log per restart.
pub fn prune_runs(container_dir: &Path, first_kept: u32, min_age: std::time::Duration) {
    let Ok(rd) = fs::read_dir(container_dir) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name();
        let run = name
            .to_str()
            .and_then(|n| n.split_once(".log"))
            .filter(|(_, rest)| rest.is_empty() || rest.starts_with('.'))
            .and_then(|(run, _)| run.parse::<u32>().ok());
        let old_enough = e
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age >= min_age);
        if run.is_some_and(|r| r < first_kept) && old_enough {
            let _ = fs::remove_file(e.path());
        }
    }
}

/// Splits one stream's bytes into CRI records.
#[derive(Default)]
pub struct LineSplitter {
    pending: Vec<u8>,
}

impl LineSplitter {
    /// Feed bytes; calls `emit(partial, line)` for each complete line (without `\n`) and for
    /// each `MAX_LINE` piece of an over-long one.
    pub fn feed(&mut self, mut data: &[u8], emit: &mut dyn FnMut(bool, &[u8])) {
        while let Some(nl) = data.iter().position(|&b| b == b'\n') {
            if self.pending.is_empty() {
                emit_line(&data[..nl], emit);
            } else {
                self.pending.extend_from_slice(&data[..nl]);
                emit_line(&self.pending, emit);
                self.pending.clear();
            }
            data = &data[nl + 1..];
        }
        self.pending.extend_from_slice(data);
        if self.pending.len() >= MAX_LINE {
            let whole = self.pending.len() / MAX_LINE * MAX_LINE;
            for piece in self.pending[..whole].chunks(MAX_LINE) {
                emit(true, piece);
            }
            self.pending.drain(..whole);
        }
    }

    /// At end of stream: an unterminated last line is a full record.
    pub fn finish(&mut self, emit: &mut dyn FnMut(bool, &[u8])) {
        if !self.pending.is_empty() {
            emit(false, &self.pending);
            self.pending.clear();
        }
    }
}

/// One complete line: `P` pieces of `MAX_LINE`, then the `F` rest.
fn emit_line(line: &[u8], emit: &mut dyn FnMut(bool, &[u8])) {
    let mut rest = line;
    while rest.len() > MAX_LINE {
        emit(true, &rest[..MAX_LINE]);
        rest = &rest[MAX_LINE..];
    }
    emit(false, rest);
}

/// The lines of a CRI log file as (timestamp, content), partial records joined.
fn lines(path: &Path) -> Vec<(Vec<u8>, Vec<u8>)> {
    let Ok(text) = fs::read(path) else {
        return Vec::new();
    };
    let mut lines: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let mut open = false;
    for rec in text.split(|&b| b == b'\n').filter(|r| !r.is_empty()) {
        let mut parts = rec.splitn(4, |&b| b == b' ');
        let (ts, _, tag, content) = (parts.next(), parts.next(), parts.next(), parts.next());
        let content = content.unwrap_or_default();
        match lines.last_mut() {
            Some(last) if open => last.1.extend_from_slice(content),
            _ => lines.push((ts.unwrap_or_default().to_vec(), content.to_vec())),
        }
        open = tag == Some(b"P");
    }
    lines
}

/// A log as `kubectl logs` shows it: each line's content (prefixed with its timestamp if
/// asked), the last `tail` lines only if given.
pub fn render(path: &Path, tail: Option<usize>, timestamps: bool) -> Vec<u8> {
    let all = lines(path);
    let start = tail.map_or(0, |n| all.len().saturating_sub(n));
    let mut out = Vec::new();
    for (ts, content) in &all[start..] {
        if timestamps {
            out.extend_from_slice(ts);
            out.push(b' ');
        }
        out.extend_from_slice(content);
        out.push(b'\n');
    }
    out
}

/// The content of the last `max_lines` lines, at most `max_bytes` from the end:
/// `FallbackToLogsOnError`'s termination message.
pub fn tail_text(path: &Path, max_lines: usize, max_bytes: usize) -> String {
    let out = render(path, Some(max_lines), false);
    let cut = out.len().saturating_sub(max_bytes);
    String::from_utf8_lossy(&out[cut..]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(chunks: &[&[u8]]) -> Vec<(bool, Vec<u8>)> {
        let mut s = LineSplitter::default();
        let mut out = Vec::new();
        for c in chunks {
            s.feed(c, &mut |p, l| out.push((p, l.to_vec())));
        }
        s.finish(&mut |p, l| out.push((p, l.to_vec())));
        out
    }

    #[test]
    fn lines_across_chunks() {
        let out = split(&[b"hel", b"lo\nwor", b"ld\n", b"tail"]);
        assert_eq!(
            out,
            vec![
                (false, b"hello".to_vec()),
                (false, b"world".to_vec()),
                (false, b"tail".to_vec())
            ]
        );
    }

    #[test]
    fn long_lines_are_partial_records() {
        let long = vec![b'x'; MAX_LINE + 10];
        let mut data = long.clone();
        data.push(b'\n');
        let out = split(&[&data]);
        assert_eq!(out.len(), 2);
        assert!(out[0].0 && out[0].1.len() == MAX_LINE);
        assert_eq!(out[1], (false, vec![b'x'; 10]));
    }

    #[test]
    fn records_rotation_and_tail() {
        let dir = std::env::temp_dir().join(format!("podinit-logs-{}", crate::util::random_hex(4)));
        let path = LogFile::path_for(&dir, "web", 0);
        let mut f = LogFile::create(path.clone()).unwrap();
        f.record(0, Stream::Stdout, false, b"one");
        f.record(0, Stream::Stderr, true, b"tw");
        f.record(0, Stream::Stderr, false, b"o");
        let text = fs::read_to_string(&path).unwrap();
        assert_eq!(
            text.lines().next().unwrap(),
            "1970-01-01T00:00:00.000000000Z stdout F one"
        );
        assert_eq!(tail_text(&path, 80, 2048), "one\ntwo\n");
        assert_eq!(tail_text(&path, 1, 2048), "two\n");
        assert_eq!(tail_text(&path, 80, 3), "wo\n");
        let stamped = String::from_utf8(render(&path, Some(1), true)).unwrap();
        assert_eq!(stamped, "1970-01-01T00:00:00.000000000Z two\n");
        // Rotation keeps 5 files.
        let big = vec![b'y'; 1 << 20];
        for _ in 0..60 {
            f.record(0, Stream::Stdout, false, &big);
        }
        let files = fs::read_dir(path.parent().unwrap()).unwrap().count();
        assert_eq!(files, KEEP_FILES);
        assert!(fs::metadata(&path).unwrap().len() <= ROTATE_BYTES);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn only_the_current_and_previous_runs_keep_their_logs() {
        let dir =
            std::env::temp_dir().join(format!("podinit-prune-{}", crate::util::random_hex(4)));
        fs::create_dir_all(&dir).unwrap();
        for f in [
            "0.log", "1.log", "1.log.1", "1.log.4", "2.log", "3.log", "x.log", "1.logx",
        ] {
            fs::write(dir.join(f), "").unwrap();
        }
        prune_runs(&dir, 2, GC_PERIOD);
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 8, "too young to go");
        prune_runs(&dir, 2, std::time::Duration::ZERO);
        let mut left: Vec<String> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["1.logx", "2.log", "3.log", "x.log"]);
        fs::remove_dir_all(&dir).unwrap();
    }
}
