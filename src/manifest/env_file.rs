//! Env files (`env[].valueFrom.fileKeyRef`, KEP-3721, GA in 1.37), parsed as kubelet's
//! `ParseEnv` (pkg/kubelet/util/env/env_util.go) parses them: a subset of POSIX shell in
//! which every value is single-quoted and taken literally.
//!
//! - blank lines and lines starting with `#` (after leading blanks) are skipped;
//! - `NAME='value'`: no blank before `=`; the value runs to the next `'`, across lines
//!   (newlines kept); after it only blanks or a `# comment`;
//! - `NAME= 'value'` (a blank after `=`) sets the empty string, as bash does;
//! - an unquoted or double-quoted value is an error;
//! - the first assignment of the key is its value.
//!
//! The file is at most [`MAX_FILE_BYTES`]; a key longer than [`MAX_KEY_BYTES`] cannot be
//! asked for (validation refuses it). Pure.

/// The largest env file kubelet reads (64 KiB).
pub const MAX_FILE_BYTES: usize = 64 * 1024;
/// The longest key (`fileKeyRef.key`).
pub const MAX_KEY_BYTES: usize = 128;

/// Why an env file is not valid, in kubelet's words.
#[derive(Debug, PartialEq, Eq)]
pub enum FormatError {
    /// Line `line` is not an assignment kubelet reads.
    Line { line: usize, why: &'static str },
    /// The single quote opened on line `start` is never closed.
    Unclosed { start: usize },
}

impl std::fmt::Display for FormatError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FormatError::Line { line, why } => {
                write!(f, "invalid environment variable format at line {line}: {why}")
            }
            FormatError::Unclosed { start } => write!(
                f,
                "invalid environment variable format starting at line {start}: unclosed single quote"
            ),
        }
    }
}

/// The value of `key` in the env file `text`: `Ok(None)` when the file does not assign it;
/// an error names the line that is not valid.
pub fn lookup(text: &str, key: &str) -> Result<Option<String>, FormatError> {
    let mut lines = text.lines().enumerate().map(|(n, l)| (n + 1, l));
    let bad = |line: usize, why: &'static str| FormatError::Line { line, why };
    while let Some((n, raw)) = lines.next() {
        let line = raw.trim_start_matches([' ', '\t']);
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some(eq) = line.find('=') else {
            return Err(bad(n, "missing '='"));
        };
        let name_part = &line[..eq];
        let name = name_part.trim_end_matches([' ', '\t']);
        if name.is_empty() {
            return Err(bad(n, "empty variable name"));
        }
        if name != name_part {
            return Err(bad(n, "whitespace before '=' is not allowed"));
        }
        let value_part = &line[eq + 1..];
        let value = value_part.trim_start_matches([' ', '\t']);
        if value != value_part {
            // `KEY= 'v'` assigns the empty string in bash.
            if name == key {
                return Ok(Some(String::new()));
            }
            continue;
        }
        let Some(mut rest) = value.strip_prefix('\'') else {
            return Err(bad(n, "value must be enclosed in single quotes"));
        };
        let start = n;
        let mut out = String::new();
        let mut at = n;
        loop {
            if let Some(close) = rest.find('\'') {
                out.push_str(&rest[..close]);
                let after = rest[close + 1..].trim_start_matches([' ', '\t']);
                if !after.is_empty() && !after.starts_with('#') {
                    return Err(bad(at, "unexpected content after closing quote"));
                }
                if name == key {
                    return Ok(Some(out));
                }
                break;
            }
            out.push_str(rest);
            out.push('\n');
            match lines.next() {
                Some((m, l)) => {
                    at = m;
                    rest = l;
                }
                None => return Err(FormatError::Unclosed { start }),
            }
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::lookup;

    fn ok(text: &str, key: &str) -> Option<String> {
        lookup(text, key).unwrap()
    }

    #[test]
    fn single_quoted_values_comments_and_blank_lines() {
        let f = "# settings\n\n  DB_ADDRESS='address'\nREST_ENDPOINT='endpoint' # inline\nHASH_INSIDE='a#b'\n";
        assert_eq!(ok(f, "DB_ADDRESS").as_deref(), Some("address"));
        assert_eq!(ok(f, "REST_ENDPOINT").as_deref(), Some("endpoint"));
        assert_eq!(ok(f, "HASH_INSIDE").as_deref(), Some("a#b"));
        assert_eq!(ok(f, "MISSING"), None);
    }

    #[test]
    fn values_are_literal_and_may_span_lines() {
        let f = "A='$HOME \\n \"x\"'\nB='line1\nline2'\nC=''\n";
        assert_eq!(ok(f, "A").as_deref(), Some("$HOME \\n \"x\""));
        assert_eq!(ok(f, "B").as_deref(), Some("line1\nline2"));
        assert_eq!(ok(f, "C").as_deref(), Some(""));
    }

    #[test]
    fn the_first_assignment_wins_and_a_blank_after_equals_is_empty() {
        assert_eq!(ok("K='1'\nK='2'\n", "K").as_deref(), Some("1"));
        assert_eq!(ok("K= 'v'\n", "K").as_deref(), Some(""));
        // A blank after `=` on another key is skipped, not an error.
        assert_eq!(ok("X= whatever\nK='v'\n", "K").as_deref(), Some("v"));
    }

    #[test]
    fn what_kubelet_refuses() {
        for (f, line_err) in [
            (
                "K=value\n",
                "at line 1: value must be enclosed in single quotes",
            ),
            (
                "K=\"value\"\n",
                "at line 1: value must be enclosed in single quotes",
            ),
            (
                "K ='v'\n",
                "at line 1: whitespace before '=' is not allowed",
            ),
            ("# c\nnoequals\n", "at line 2: missing '='"),
            ("='v'\n", "at line 1: empty variable name"),
            (
                "K='a''b'\n",
                "at line 1: unexpected content after closing quote",
            ),
            (
                "K='a' b\n",
                "at line 1: unexpected content after closing quote",
            ),
            (
                "X='1'\nK='open\nmore\n",
                "starting at line 2: unclosed single quote",
            ),
        ] {
            let e = lookup(f, "K").unwrap_err().to_string();
            assert!(e.ends_with(line_err), "{f:?}: {e}");
        }
        // An error before the key is reached stops the parse, as in kubelet.
        assert!(lookup("bad\nK='v'\n", "K").is_err());
        // After it, it is never read.
        assert_eq!(ok("K='v'\nbad\n", "K").as_deref(), Some("v"));
    }
}
