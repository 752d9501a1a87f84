//! blkio figures: v1's per-device tables as runc picks them among the I/O schedulers'
//! files, and v2's `io.stat` put into the same tables.

use serde_json::{Map, Value};
use std::path::Path;

use super::{put, Files};

/// blkio's tables from the first family of files the kernel fills (bfq's debug files,
/// bfq's, cfq's, then the throttle layer's), as runc chooses them.
pub(super) fn v1_blkio(f: &Files, dir: &Path) -> Value {
    const BYTES: &str = "ioServiceBytesRecursive";
    const IOS: &str = "ioServicedRecursive";
    const FULL: [(&str, &str); 8] = [
        ("sectors_recursive", "sectorsRecursive"),
        ("io_service_time_recursive", "ioServiceTimeRecursive"),
        ("io_wait_time_recursive", "ioWaitTimeRecursive"),
        ("io_merged_recursive", "ioMergedRecursive"),
        ("io_queued_recursive", "ioQueueRecursive"),
        ("time_recursive", "ioTimeRecursive"),
        ("io_serviced_recursive", IOS),
        ("io_service_bytes_recursive", BYTES),
    ];
    let short = |prefix: &str, suffix: &str| -> Vec<(String, &'static str)> {
        vec![
            (format!("{prefix}io_serviced{suffix}"), IOS),
            (format!("{prefix}io_service_bytes{suffix}"), BYTES),
        ]
    };
    let full = |prefix: &str| -> Vec<(String, &'static str)> {
        FULL.iter()
            .map(|(f, k)| (format!("{prefix}{f}"), *k))
            .collect()
    };
    let families = [
        full("blkio.bfq."),
        short("blkio.bfq.", "_recursive"),
        full("blkio."),
        short("blkio.throttle.", "_recursive"),
        short("blkio.throttle.", ""),
    ];
    let mut out = Map::new();
    for family in families {
        for (i, (file, key)) in family.iter().enumerate() {
            let entries = blkio_entries(f, dir, file);
            if entries.is_empty() {
                if i == 0 {
                    break;
                }
                return Value::Object(out);
            }
            out.insert((*key).into(), Value::Array(entries));
            if i + 1 == family.len() {
                return Value::Object(out);
            }
        }
    }
    Value::Object(out)
}

/// Lines `MAJ:MIN [Op] VALUE` (a last `Total N` line skipped).
fn blkio_entries(f: &Files, dir: &Path, file: &str) -> Vec<Value> {
    let Some(text) = f.read(dir, file) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split([' ', ':']).filter(|s| !s.is_empty()).collect();
            let (op, value) = match f.len() {
                3 => ("", f[2]),
                4 => (f[2], f[3]),
                _ => return None,
            };
            Some(blkio_entry(
                f[0].parse().ok()?,
                f[1].parse().ok()?,
                op,
                value.parse().ok()?,
            ))
        })
        .collect()
}

fn blkio_entry(major: u64, minor: u64, op: &str, value: u64) -> Value {
    let mut m = Map::new();
    put(&mut m, "major", major);
    put(&mut m, "minor", minor);
    if !op.is_empty() {
        m.insert("op".into(), op.into());
    }
    put(&mut m, "value", value);
    Value::Object(m)
}

/// v2's `io.stat` in v1's tables: bytes and operations read and written.
pub(super) fn v2_io(f: &Files, dir: &Path) -> Value {
    let (mut bytes, mut ios) = (Vec::new(), Vec::new());
    for line in f.read(dir, "io.stat").unwrap_or_default().lines() {
        let mut it = line.split_whitespace();
        let Some((maj, min)) = it.next().and_then(|d| d.split_once(':')) else {
            continue;
        };
        let (Ok(maj), Ok(min)) = (maj.parse(), min.parse()) else {
            continue;
        };
        for kv in it {
            let Some((k, v)) = kv.split_once('=') else {
                continue;
            };
            let (table, op) = match k {
                "rbytes" => (&mut bytes, "Read"),
                "wbytes" => (&mut bytes, "Write"),
                "rios" => (&mut ios, "Read"),
                "wios" => (&mut ios, "Write"),
                _ => continue,
            };
            if let Ok(v) = v.parse() {
                table.push(blkio_entry(maj, min, op, v));
            }
        }
    }
    let mut m = Map::new();
    if !bytes.is_empty() {
        m.insert("ioServiceBytesRecursive".into(), bytes.into());
    }
    if !ios.is_empty() {
        m.insert("ioServicedRecursive".into(), ios.into());
    }
    Value::Object(m)
}
