//! The command line's grammar (docs/interface.md §2) as one table, `commands::COMMANDS`, that
//! parsing, `--help` and the shell completions all read. `lexopt` splits the words; the
//! rules (which options a command takes, which need a value, defaults, allowed values)
//! are here, in a table rather than a parser framework to keep the binary small.

pub mod client;
pub mod commands;
pub mod completions;
pub mod exit;
pub mod help;
pub mod images;
pub mod images_pull;
pub mod pods;

use std::ffi::OsString;
use std::path::PathBuf;

/// One subcommand.
pub struct Cmd {
    pub name: &'static str,
    pub about: &'static str,
    pub opts: &'static [Opt],
    /// Required positional arguments, in order.
    pub args: &'static [Pos],
    /// Words after `--`, handed on as they are (`exec … -- COMMAND [ARG...]`).
    pub trailing: Option<Trailing>,
    /// A client command: it also takes the pod as an optional first positional `POD`
    /// (`NAME` or `NAMESPACE/NAME`), found under `--state-root`.
    pub pod: bool,
}

pub struct Opt {
    pub long: &'static str,
    pub short: Option<char>,
    /// The value's name in help (`DIR`); `None` for a flag.
    pub value: Option<&'static str>,
    pub help: &'static str,
    /// The only values accepted, if not empty.
    pub choices: &'static [&'static str],
    pub default: Option<&'static str>,
    /// Complete the value with file names.
    pub path: bool,
}

pub struct Pos {
    pub name: &'static str,
    pub help: &'static str,
    /// The only values accepted, if not empty.
    pub choices: &'static [&'static str],
    /// Complete it with file names.
    pub path: bool,
}

pub struct Trailing {
    pub name: &'static str,
    pub required: bool,
}

/// A flag.
pub const fn flag(long: &'static str, short: Option<char>, help: &'static str) -> Opt {
    Opt {
        long,
        short,
        value: None,
        help,
        choices: &[],
        default: None,
        path: false,
    }
}

/// An option with a value.
pub const fn opt(long: &'static str, value: &'static str, help: &'static str) -> Opt {
    Opt {
        long,
        short: None,
        value: Some(value),
        help,
        choices: &[],
        default: None,
        path: false,
    }
}

impl Opt {
    pub const fn short(mut self, c: char) -> Opt {
        self.short = Some(c);
        self
    }
    pub const fn choices(mut self, c: &'static [&'static str]) -> Opt {
        self.choices = c;
        self
    }
    pub const fn default(mut self, d: &'static str) -> Opt {
        self.default = Some(d);
        self
    }
    pub const fn path(mut self) -> Opt {
        self.path = true;
        self
    }
}

/// What the command line asks for.
pub enum Parsed {
    Command(Matches),
    /// `--help`, `help [COMMAND]`: this text on stdout.
    Help(String),
    Version,
}

/// A wrong command line: one line, naming what is wrong and where to read more.
#[derive(Debug)]
pub struct Error(pub String);

impl Error {
    /// What is wrong with the words of `command` (`images pull`; `None`: podinit's own),
    /// and where its help is.
    pub fn usage(command: Option<&str>, what: impl std::fmt::Display) -> Error {
        Error(match command {
            Some(c) => format!("{what} (see `podinit {c} --help`)"),
            None => format!("{what} (see `podinit --help`)"),
        })
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A command with the words given to it.
pub struct Matches {
    pub cmd: &'static Cmd,
    values: Vec<(&'static str, OsString)>,
    flags: Vec<&'static str>,
    pub args: Vec<OsString>,
    pub trailing: Vec<String>,
    /// The optional first positional of a client command.
    pub pod: Option<String>,
}

pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Parsed, Error> {
    use lexopt::Arg::{Long, Short, Value};
    let mut p = lexopt::Parser::from_args(args);
    let top_err = |what: String| Error::usage(None, what);
    let cmd = match p.next().map_err(|e| top_err(e.to_string()))? {
        None => return Err(top_err("no command given".into())),
        Some(Long("help") | Short('h')) => return Ok(Parsed::Help(help::top())),
        Some(Long("version") | Short('V')) => return Ok(Parsed::Version),
        Some(Value(v)) if v == "help" => {
            let text = match p.next().map_err(|e| top_err(e.to_string()))? {
                Some(Value(name)) => help::command(find(&name)?),
                _ => help::top(),
            };
            return Ok(Parsed::Help(text));
        }
        Some(Value(v)) => find(&v)?,
        Some(other) => return Err(top_err(format!("unknown option {}", show(&other)))),
    };
    let err = |what: String| Error::usage(Some(cmd.name), what);
    let mut m = Matches {
        cmd,
        values: vec![],
        flags: vec![],
        args: vec![],
        trailing: vec![],
        pod: None,
    };
    loop {
        // `--` ends the options; what follows is the trailing command, word for word.
        if let Some(mut raw) = p.try_raw_args() {
            if raw.peek().is_some_and(|a| a == "--") {
                raw.next();
                let Some(t) = &cmd.trailing else {
                    return Err(err("unexpected `--`".into()));
                };
                for a in raw {
                    m.trailing.push(
                        a.into_string()
                            .map_err(|a| err(format!("{}: not valid UTF-8: {a:?}", t.name)))?,
                    );
                }
                break;
            }
        }
        let Some(arg) = p.next().map_err(|e| err(e.to_string()))? else {
            break;
        };
        let o = match &arg {
            Long("help") | Short('h') => return Ok(Parsed::Help(help::command(cmd))),
            Long(l) => cmd.opts.iter().find(|o| o.long == *l),
            Short(s) => cmd.opts.iter().find(|o| o.short == Some(*s)),
            Value(v) => {
                if m.args.len() == cmd.args.len() + usize::from(cmd.pod) {
                    let hint = match &cmd.trailing {
                        Some(t) => format!(": a {} goes after `--`", t.name),
                        None => String::new(),
                    };
                    return Err(err(format!("unexpected argument {v:?}{hint}")));
                }
                m.args.push(v.clone());
                continue;
            }
        };
        let Some(o) = o else {
            return Err(err(format!("unknown option {}", show(&arg))));
        };
        let Some(name) = o.value else {
            // `--watch=yes`; in `-fp` the `p` is the next flag, not a value.
            let long = matches!(arg, Long(_));
            if let Some(v) = long.then(|| p.optional_value()).flatten() {
                return Err(err(format!("--{} takes no value, got {v:?}", o.long)));
            }
            m.flags.push(o.long);
            continue;
        };
        // A value may start with `-`, but not be one of the command's own options: in
        // `--state-dir --bundles b` the state dir was forgotten.
        let v = p
            .value()
            .ok()
            .filter(|v| !is_option_of(cmd, v))
            .ok_or_else(|| err(format!("--{} needs a value ({name})", o.long)))?;
        check_choice(cmd, &format!("--{}", o.long), o.choices, &v)?;
        m.values.retain(|(k, _)| *k != o.long);
        m.values.push((o.long, v));
    }
    // One word more than the command's own: the first names the pod.
    if m.args.len() > cmd.args.len() {
        let pod = m.args.remove(0);
        let pod = pod
            .into_string()
            .map_err(|v| err(format!("POD: not valid UTF-8: {v:?}")))?;
        m.pod = Some(pod);
    }
    for (pos, v) in cmd.args.iter().zip(&m.args) {
        check_choice(cmd, pos.name, pos.choices, v)?;
    }
    if let Some(missing) = cmd.args.get(m.args.len()) {
        return Err(err(format!("{} is missing", missing.name)));
    }
    if let Some(t) = cmd.trailing.as_ref().filter(|t| t.required) {
        if m.trailing.is_empty() {
            return Err(err(format!(
                "{} is missing: a {} goes after `--`",
                t.name, t.name
            )));
        }
    }
    Ok(Parsed::Command(m))
}

/// `v` is one of `choices`, if there are any; else an error naming `what` of `cmd`.
fn check_choice(cmd: &Cmd, what: &str, choices: &[&str], v: &std::ffi::OsStr) -> Result<(), Error> {
    if choices.is_empty() || choices.iter().any(|c| v == *c) {
        return Ok(());
    }
    Err(Error::usage(
        Some(cmd.name),
        format_args!("{what}: {v:?} is not one of {}", choices.join(", ")),
    ))
}

/// Whether `word` is `--NAME` or `--NAME=…` for an option of `cmd` (or `--help`).
fn is_option_of(cmd: &Cmd, word: &std::ffi::OsStr) -> bool {
    let Some(name) = word.to_str().and_then(|w| w.strip_prefix("--")) else {
        return false;
    };
    let name = name.split('=').next().unwrap_or(name);
    name == "help" || cmd.opts.iter().any(|o| o.long == name)
}

fn find(name: &std::ffi::OsStr) -> Result<&'static Cmd, Error> {
    commands::COMMANDS
        .iter()
        .find(|c| name == c.name)
        .ok_or_else(|| Error::usage(None, format_args!("unknown command {name:?}")))
}

fn show(a: &lexopt::Arg) -> String {
    match a {
        lexopt::Arg::Long(l) => format!("--{l}"),
        lexopt::Arg::Short(s) => format!("-{s}"),
        lexopt::Arg::Value(v) => format!("{v:?}"),
    }
}

impl Matches {
    fn opt(&self, long: &str) -> &'static Opt {
        self.cmd
            .opts
            .iter()
            .find(|o| o.long == long)
            .unwrap_or_else(|| panic!("podinit {} has no --{long}", self.cmd.name))
    }

    fn raw(&self, long: &str) -> Option<OsString> {
        let given = self.values.iter().find(|(k, _)| *k == long);
        given
            .map(|(_, v)| v.clone())
            .or_else(|| self.opt(long).default.map(OsString::from))
    }

    pub fn flag(&self, long: &str) -> bool {
        self.opt(long);
        self.flags.contains(&long)
    }

    pub fn path(&self, long: &str) -> Option<PathBuf> {
        self.raw(long).map(PathBuf::from)
    }

    pub fn string(&self, long: &str) -> Result<Option<String>, Error> {
        self.raw(long)
            .map(|v| {
                v.into_string()
                    .map_err(|v| self.bad(long, &format!("not valid UTF-8: {v:?}")))
            })
            .transpose()
    }

    /// An option that must be given.
    pub fn required(&self, long: &str) -> Result<String, Error> {
        self.string(long)?
            .ok_or_else(|| self.bad(long, "is required"))
    }

    /// A whole number no smaller than `min`.
    pub fn number(&self, long: &str, min: u64) -> Result<Option<u64>, Error> {
        let Some(s) = self.string(long)? else {
            return Ok(None);
        };
        match s.parse::<u64>() {
            Ok(n) if n >= min => Ok(Some(n)),
            Ok(_) => Err(self.bad(long, &format!("{s} is less than {min}"))),
            Err(_) => Err(self.bad(long, &format!("{s:?} is not a whole number"))),
        }
    }

    /// The `i`th positional argument (required, so present).
    pub fn arg(&self, i: usize) -> &OsString {
        &self.args[i]
    }

    pub fn arg_string(&self, i: usize) -> Result<String, Error> {
        self.args[i].clone().into_string().map_err(|v| {
            Error::usage(
                Some(self.cmd.name),
                format_args!("{}: not valid UTF-8: {v:?}", self.cmd.args[i].name),
            )
        })
    }

    fn bad(&self, long: &str, what: &str) -> Error {
        Error::usage(Some(self.cmd.name), format_args!("--{long}: {what}"))
    }
}

#[cfg(test)]
mod tests;
