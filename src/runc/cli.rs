//! runc's flag syntax (urfave/cli v1 over Go's `flag` package): `--flag value`,
//! `--flag=value`, the single-dash long form `-flag`, bool flags that take a value only
//! as `-flag=false`, and `--` to end the flags. Hand-written rather than lexopt, which
//! reads `-root` as four short flags. Verbs other than `exec` and `ps` also take their
//! flags after the positional arguments, as urfave/cli reorders them.

use super::Error;

/// One flag of a verb (or of the global set): its names without dashes, the first the
/// canonical one.
#[derive(Clone, Copy)]
pub struct Flag {
    pub names: &'static [&'static str],
    /// Takes a value (`--root DIR`); otherwise a bool.
    pub value: bool,
    pub help: &'static str,
}

pub const fn val(names: &'static [&'static str], help: &'static str) -> Flag {
    Flag {
        names,
        value: true,
        help,
    }
}

pub const fn bool_(names: &'static [&'static str], help: &'static str) -> Flag {
    Flag {
        names,
        value: false,
        help,
    }
}

/// What a command line gave: flags in order (canonical name, value; "true"/"false" for
/// a bool) and the positional arguments.
#[derive(Debug, Default, PartialEq)]
pub struct Args {
    pub flags: Vec<(&'static str, String)>,
    pub pos: Vec<String>,
    /// `--help` / `-h` was given.
    pub help: bool,
}

impl Args {
    /// The last value of flag `name`.
    pub fn value(&self, name: &str) -> Option<&str> {
        self.flags
            .iter()
            .rev()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Every value of a repeatable flag (`--env`), in order.
    pub fn values(&self, name: &str) -> Vec<String> {
        self.flags
            .iter()
            .filter(|(n, _)| *n == name)
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// A bool flag: its last value, false when absent.
    pub fn on(&self, name: &str) -> bool {
        self.value(name) == Some("true")
    }

    /// A number flag (`--preserve-fds`), 0 when absent.
    pub fn number(&self, name: &str) -> Result<u32, Error> {
        match self.value(name) {
            None => Ok(0),
            Some(v) => v.parse().map_err(|_| {
                Error::Usage(format!("invalid value {v:?} for flag -{name}: parse error"))
            }),
        }
    }

    /// The one positional argument a verb takes (the container's ID), as runc checks it.
    pub fn exactly_one(&self, verb: &str) -> Result<&str, Error> {
        match self.pos.as_slice() {
            [id] => Ok(id),
            _ => Err(Error::Usage(format!(
                "{verb:?} requires exactly 1 argument(s)"
            ))),
        }
    }

    /// The first positional argument, more allowed.
    pub fn at_least_one(&self, verb: &str) -> Result<&str, Error> {
        self.pos
            .first()
            .map(String::as_str)
            .ok_or_else(|| Error::Usage(format!("{verb:?} requires a minimum of 1 argument(s)")))
    }
}

fn find<'f>(table: &'f [Flag], name: &str) -> Option<&'f Flag> {
    table.iter().find(|f| f.names.contains(&name))
}

/// A flag token's name and inline value: `--a=b` → (`a`, Some(`b`)); None if `arg` is no
/// flag (`-`, no dash).
fn split_flag(arg: &str) -> Option<(&str, Option<&str>)> {
    let body = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-'))?;
    if body.is_empty() || body.starts_with('-') || body.starts_with('=') {
        return None;
    }
    Some(match body.split_once('=') {
        Some((n, v)) => (n, Some(v)),
        None => (body, None),
    })
}

/// A command line that does not parse, in Go's flag package's words.
fn usage(m: String) -> Error {
    Error::Usage(m)
}

/// Parse `args` against `table`. With `reorder`, flags of the table found after a
/// positional argument are taken too (urfave/cli's reordering); without, the first
/// positional argument ends the flags (Go's flag package), so that `exec ID sh -c x`
/// keeps `-c` for the command.
pub fn parse(table: &[Flag], args: &[String], reorder: bool) -> Result<Args, Error> {
    let mut out = Args::default();
    let mut i = 0;
    let mut flags_done = false;
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        if flags_done {
            out.pos.push(arg.clone());
            continue;
        }
        if arg == "--" {
            flags_done = true;
            continue;
        }
        let Some((name, inline)) = split_flag(arg) else {
            out.pos.push(arg.clone());
            flags_done = !reorder;
            continue;
        };
        if !out.pos.is_empty() && find(table, name).is_none() {
            // After a positional argument, an unknown dash word is an argument (`kill ID -9`).
            out.pos.push(arg.clone());
            continue;
        }
        if name == "help" || name == "h" {
            out.help = true;
            continue;
        }
        let flag = find(table, name)
            .ok_or_else(|| usage(format!("flag provided but not defined: -{name}")))?;
        let canonical = flag.names[0];
        let value = if flag.value {
            match inline {
                Some(v) => v.to_string(),
                None => {
                    let v = args
                        .get(i)
                        .ok_or_else(|| usage(format!("flag needs an argument: -{name}")))?;
                    i += 1;
                    v.clone()
                }
            }
        } else {
            match inline {
                None | Some("true") | Some("1") | Some("t") | Some("T") | Some("TRUE") => {
                    "true".to_string()
                }
                Some("false") | Some("0") | Some("f") | Some("F") | Some("FALSE") => {
                    "false".to_string()
                }
                Some(v) => {
                    return Err(usage(format!(
                        "invalid boolean value {v:?} for -{name}: parse error"
                    )))
                }
            }
        };
        out.flags.push((canonical, value));
    }
    Ok(out)
}

/// The OPTIONS section of a verb's help, as urfave/cli lays it out.
pub fn options_help(table: &[Flag]) -> String {
    let names: Vec<String> = table
        .iter()
        .map(|f| {
            f.names
                .iter()
                .map(|n| {
                    let dash = if n.len() == 1 { "-" } else { "--" };
                    if f.value {
                        format!("{dash}{n} value")
                    } else {
                        format!("{dash}{n}")
                    }
                })
                .collect::<Vec<_>>()
                .join(", ")
        })
        .collect();
    let width = names.iter().map(String::len).max().unwrap_or(0);
    let mut s = String::new();
    for (n, f) in names.iter().zip(table) {
        s.push_str(&format!("   {n:width$}  {}\n", f.help));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &[Flag] = &[
        val(&["bundle", "b"], "bundle"),
        bool_(&["detach", "d"], "detach"),
        val(&["env", "e"], "env"),
    ];

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn long_short_single_dash_and_inline_values() {
        let a = parse(T, &v(&["--bundle", "/b", "-d", "x"]), true).unwrap();
        assert_eq!(a.value("bundle"), Some("/b"));
        assert!(a.on("detach"));
        assert_eq!(a.pos, v(&["x"]));
        let a = parse(T, &v(&["-bundle=/c", "-b", "/d", "x"]), true).unwrap();
        assert_eq!(a.value("bundle"), Some("/d"));
        let a = parse(T, &v(&["--detach=false", "x"]), true).unwrap();
        assert!(!a.on("detach"));
        let a = parse(T, &v(&["-e", "A=1", "--env=B=2", "x"]), true).unwrap();
        assert_eq!(a.values("env"), v(&["A=1", "B=2"]));
    }

    #[test]
    fn reordering_takes_flags_after_the_id_but_not_unknown_dash_words() {
        let a = parse(T, &v(&["x", "--detach"]), true).unwrap();
        assert!(a.on("detach"));
        assert_eq!(a.pos, v(&["x"]));
        let a = parse(T, &v(&["x", "-9"]), true).unwrap();
        assert_eq!(a.pos, v(&["x", "-9"]));
        let a = parse(T, &v(&["x", "--", "-d"]), true).unwrap();
        assert_eq!(a.pos, v(&["x", "-d"]));
    }

    #[test]
    fn without_reordering_the_first_argument_ends_the_flags() {
        let a = parse(T, &v(&["-d", "x", "sh", "-d", "-c", "true"]), false).unwrap();
        assert!(a.on("detach"));
        assert_eq!(a.pos, v(&["x", "sh", "-d", "-c", "true"]));
    }

    #[test]
    fn errors_as_go_flag_words_them() {
        assert_eq!(
            parse(T, &v(&["--bogus", "x"]), true)
                .unwrap_err()
                .to_string(),
            "flag provided but not defined: -bogus"
        );
        assert_eq!(
            parse(T, &v(&["--bundle"]), true).unwrap_err().to_string(),
            "flag needs an argument: -bundle"
        );
        assert!(parse(T, &v(&["--detach=maybe"]), true).is_err());
        assert!(parse(T, &v(&["--help"]), true).unwrap().help);
        let a = parse(T, &v(&["a", "b"]), true).unwrap();
        let e = a.exactly_one("state").unwrap_err();
        assert_eq!(e.to_string(), "\"state\" requires exactly 1 argument(s)");
        assert_eq!(e.kind(), crate::error::Kind::InvalidArgument);
    }

    #[test]
    fn help_lists_every_flag() {
        let h = options_help(T);
        assert!(h.contains("--bundle value, -b value  bundle"));
        assert!(h.contains("--detach, -d"));
    }
}
