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
    emit(if warning { "warning" } else { "info" }, &msg);
}

fn emit(level: &str, msg: &str) {
    let line = if JSON.load(Ordering::Relaxed) {
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
    };
    eprintln!("{line}");
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
