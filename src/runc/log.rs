//! Log lines as runc writes them (logrus): text `time="…" level=error msg="…"` or, with
//! `--log-format json`, `{"level":"error","msg":"…","time":"…"}`. Without `--log` they go
//! to stderr; with it to the file, and an error is also printed bare on stderr. containerd's
//! shim reads the last error line of the file to say why a verb failed.

use std::io::Write;
use std::path::PathBuf;
use std::sync::OnceLock;

#[derive(Default)]
struct Config {
    file: Option<PathBuf>,
    json: bool,
    debug: bool,
}

static CONFIG: OnceLock<Config> = OnceLock::new();

/// Set once, from the global flags, before any verb runs.
pub fn init(file: Option<PathBuf>, json: bool, debug: bool) {
    let _ = CONFIG.set(Config { file, json, debug });
}

fn config() -> &'static Config {
    CONFIG.get_or_init(Config::default)
}

/// The time as logrus prints it: RFC 3339, whole seconds, UTC.
fn now() -> String {
    crate::util::rfc3339(crate::util::now_unix_nanos(), crate::util::Fraction::Whole)
}

/// One log line, without its newline.
pub fn line(json: bool, level: &str, msg: &str, time: &str) -> String {
    if json {
        // Keys in logrus's (sorted) order.
        let mut m = serde_json::Map::new();
        m.insert("level".into(), level.into());
        m.insert("msg".into(), msg.into());
        m.insert("time".into(), time.into());
        return serde_json::Value::Object(m).to_string();
    }
    format!(
        "time={} level={level} msg={}",
        quote(time),
        quote_if_needed(msg)
    )
}

/// logrus quotes a value unless it is made only of these characters.
fn quote_if_needed(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-._/@^+".contains(c));
    if plain {
        s.to_string()
    } else {
        quote(s)
    }
}

/// Go's `%q`: double quotes, backslash escapes.
fn quote(s: &str) -> String {
    let mut q = String::with_capacity(s.len() + 2);
    q.push('"');
    for c in s.chars() {
        match c {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            '\n' => q.push_str("\\n"),
            '\t' => q.push_str("\\t"),
            '\r' => q.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                q.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

fn emit(level: &str, msg: &str) {
    let c = config();
    let text = line(c.json, level, msg, &now());
    match &c.file {
        Some(path) => {
            let written = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .and_then(|mut f| f.write_all(format!("{text}\n").as_bytes()));
            if level == "error" || written.is_err() {
                eprintln!("{msg}");
            }
        }
        None => eprintln!("{text}"),
    }
}

pub fn error(msg: &str) {
    emit("error", msg);
}

pub fn warn(msg: &str) {
    emit("warning", msg);
}

pub fn debug(msg: &str) {
    if config().debug {
        emit("debug", msg);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_lines_as_logrus() {
        assert_eq!(
            line(
                false,
                "error",
                "container does not exist",
                "2026-11-25T15:11:36Z"
            ),
            r#"time="2026-11-25T15:11:36Z" level=error msg="container does not exist""#
        );
        assert_eq!(
            line(false, "debug", "plain", "t"),
            r#"time="t" level=debug msg=plain"#
        );
        assert_eq!(
            line(false, "error", "a \"b\"\n", "t"),
            r#"time="t" level=error msg="a \"b\"\n""#
        );
    }

    #[test]
    fn json_lines_as_logrus() {
        assert_eq!(
            line(
                true,
                "error",
                "container does not exist",
                "2026-11-25T15:11:36Z"
            ),
            r#"{"level":"error","msg":"container does not exist","time":"2026-11-25T15:11:36Z"}"#
        );
    }

    #[test]
    fn the_time_is_rfc3339_in_whole_seconds() {
        let t = now();
        assert_eq!(t.len(), 20, "{t}");
        assert!(t.ends_with('Z'));
    }
}
