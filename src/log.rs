//! podinit's own log lines, on stderr: `podinit: <message>` or, with `--log-format json`,
//! one JSON object a line.

use std::sync::atomic::{AtomicBool, Ordering};

static JSON: AtomicBool = AtomicBool::new(false);

pub fn set_json(on: bool) {
    JSON.store(on, Ordering::Relaxed);
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
