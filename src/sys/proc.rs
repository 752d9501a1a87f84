//! What /proc says of a process, read with the `procfs` crate.

/// The start time of process `pid` in clock ticks since boot (field 22 of
/// `/proc/<pid>/stat`), None when there is no such process. With the pid it names a
/// process for good: a pid reused by a later process has another start time.
pub fn start_time(pid: i32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 2..];
    rest.split_whitespace().nth(19)?.parse().ok()
}
