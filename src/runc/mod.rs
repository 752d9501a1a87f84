//! runc's command line over podinit's runtime (docs/architecture.md §5, docs/runc.md):
//! `podinit runc …` or a link whose name ends in `runc`. This module reads the global
//! flags and hands each verb its own; one file a verb.

pub mod cli;
mod create;
pub mod delete;
mod error;
mod events;
mod exec;
pub mod features;
pub mod kill;
mod list;
mod log;
mod pause;
mod ps;
mod rootless;
mod run;
pub mod spec;
pub mod start;
pub mod state;
mod status;
mod update;
mod wait;

pub use create::SPEC_FD_ENV;
pub use error::{Error, Result};

use cli::{bool_, val, Flag};
use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;

/// Where state lives without `--root`.
pub const DEFAULT_ROOT: &str = "/run/podinit-runc";

const GLOBAL: &[Flag] = &[
    bool_(&["debug"], "enable debug logging"),
    val(
        &["log"],
        "set the log file to write runc logs to (default is '/dev/stderr')",
    ),
    val(
        &["log-format"],
        "set the log format ('text' (default), or 'json') (default: \"text\")",
    ),
    val(
        &["root"],
        "root directory for storage of container state (default: \"/run/podinit-runc\")",
    ),
    val(
        &["criu"],
        "accepted and ignored: checkpointing is not supported",
    ),
    bool_(
        &["systemd-cgroup"],
        "enable systemd cgroup support, expects cgroupsPath to be of form \"slice:prefix:name\" for e.g. \"system.slice:runc:434234\"",
    ),
    val(
        &["rootless"],
        "ignore cgroup permission errors ('true', 'false', or 'auto') (default: \"auto\")",
    ),
    bool_(&["version", "v"], "print the version"),
];

/// Whether podinit was started under a runc name (`podinit-runc`, `runc`).
pub fn is_runc_name(argv0: &std::ffi::OsStr) -> bool {
    std::path::Path::new(argv0)
        .file_name()
        .is_some_and(|n| n.to_string_lossy().ends_with("runc"))
}

/// What the global flags set, for every verb.
pub struct Globals {
    pub root: state::Root,
    /// `--rootless` as decided (`rootless::rootless`).
    pub rootless: bool,
    /// `--systemd-cgroup`: a new container's cgroup is a systemd unit.
    pub systemd: bool,
}

/// Run runc's command line `args` (without the program name); the exit status.
pub fn main(args: Vec<OsString>) -> i32 {
    let args: Vec<String> = match args.into_iter().map(OsString::into_string).collect() {
        Ok(a) => a,
        Err(bad) => {
            log::error(&format!("argument {bad:?} is not UTF-8"));
            return 1;
        }
    };
    let g = match cli::parse(GLOBAL, &args, false) {
        Ok(g) => g,
        Err(e) => {
            // As urfave/cli: the complaint and the help on stdout, the error logged.
            print(&format!("Incorrect Usage: {e}\n\n{}", usage()));
            log::error(&e.to_string());
            return 1;
        }
    };
    let json = match g.value("log-format") {
        None | Some("text") => false,
        Some("json") => true,
        Some(other) => {
            eprintln!("unknown log-format {other:?}");
            return 1;
        }
    };
    log::init(g.value("log").map(PathBuf::from), json, g.on("debug"));
    if g.on("version") {
        print!("{}", version());
        return 0;
    }
    let Some((verb, rest)) = g.pos.split_first() else {
        print!("{}", usage());
        return if g.help { 0 } else { 1 };
    };
    if let Some(r) = g.value("rootless") {
        if !["true", "false", "auto"].contains(&r) {
            return error::report(&Error::Usage(format!("invalid --rootless argument: {r:?}")));
        }
    }
    // Absolute, as runc makes it: a later verb may run from another directory.
    let rootless = rootless::rootless(g.value("rootless"));
    let root = g
        .value("root")
        .map(PathBuf::from)
        .or_else(|| rootless::default_root(rootless))
        .unwrap_or_else(|| PathBuf::from(DEFAULT_ROOT));
    let globals = Globals {
        root: state::Root(std::path::absolute(&root).unwrap_or(root)),
        rootless,
        systemd: g.on("systemd-cgroup"),
    };
    if verb == "help" {
        match rest
            .first()
            .and_then(|n| VERBS.iter().find(|v| v.name == *n))
        {
            Some(v) => print!("{}", verb_help(v)),
            None => print!("{}", usage()),
        }
        return 0;
    }
    let Some(v) = VERBS.iter().find(|v| v.name == *verb) else {
        return error::report(&Error::NoSuchVerb(verb.clone()));
    };
    let a = match cli::parse(v.flags, rest, v.reorder) {
        Ok(a) if a.help => {
            print!("{}", verb_help(v));
            return 0;
        }
        Ok(a) => a,
        Err(e) => {
            print(&format!("Incorrect Usage: {e}\n\n{}", verb_help(v)));
            log::error(&e.to_string());
            return 1;
        }
    };
    log::debug(&format!("{verb} {rest:?}"));
    if matches!(v.name, "create" | "run" | "exec") {
        if let Err(e) = crate::runtime::seal_own_binary_or_copy() {
            log::warn(&format!(
                "running from a read-only copy of the binary: {e}; it stays writable to \
                 containers that reach /proc/PID/exe"
            ));
        }
    }
    match (v.run)(&globals, &a) {
        Ok(code) => code,
        Err(e) => error::report(&e),
    }
}

/// One verb: its flags, whether urfave/cli reorders them, and what it does (its exit
/// status, or the error to log).
struct Verb {
    name: &'static str,
    /// runc's one line about the verb, in `--help`'s list of commands.
    about: &'static str,
    usage: &'static str,
    flags: &'static [Flag],
    reorder: bool,
    run: fn(&Globals, &cli::Args) -> Result<i32>,
}

fn ok<E: Into<Error>>(r: std::result::Result<(), E>) -> Result<i32> {
    r.map(|()| 0).map_err(Into::into)
}

static VERBS: &[Verb] = &[
    Verb {
        name: "checkpoint",
        about: "checkpoint a running container (not supported)",
        usage: "checkpoint [command options] <container-id>",
        flags: &[],
        reorder: true,
        run: |_, _| {
            Err(Error::Unsupported(
                "checkpoint is not supported by podinit-runc".into(),
            ))
        },
    },
    Verb {
        name: "create",
        about: "create a container",
        usage: "create [command options] <container-id>",
        flags: create::FLAGS,
        reorder: true,
        run: |g, a| ok(create::verb(g, a)),
    },
    Verb {
        name: "delete",
        about: "delete any resources held by the container often used with detached container",
        usage: "delete [command options] <container-id>",
        flags: delete::FLAGS,
        reorder: true,
        run: |g, a| ok(delete::verb(g, a)),
    },
    Verb {
        name: "events",
        about: "display container events such as OOM notifications, cpu, memory, and IO usage statistics",
        usage: "events [command options] <container-id>",
        flags: events::FLAGS,
        reorder: true,
        run: |g, a| ok(events::verb(g, a)),
    },
    Verb {
        name: "exec",
        about: "execute new process inside the container",
        usage: "exec [command options] <container-id> <command> [command options]  || -p process.json <container-id>",
        flags: exec::FLAGS,
        reorder: false,
        run: exec::verb,
    },
    Verb {
        name: "features",
        about: "show the enabled features",
        usage: "features",
        flags: &[],
        reorder: true,
        run: |_, _| {
            print(&format!("{}\n", indented(&features::document(), b"    ")?));
            Ok(0)
        },
    },
    Verb {
        name: "kill",
        about: "kill sends the specified signal (default: SIGTERM) to the container's init process",
        usage: "kill [command options] <container-id> [signal]",
        flags: kill::FLAGS,
        reorder: true,
        run: |g, a| ok(kill::verb(g, a)),
    },
    Verb {
        name: "list",
        about: "lists containers started by runc with the given root",
        usage: "list [command options]",
        flags: list::FLAGS,
        reorder: true,
        run: |g, a| ok(list::verb(g, a)),
    },
    Verb {
        name: "pause",
        about: "pause suspends all processes inside the container",
        usage: "pause <container-id>",
        flags: &[],
        reorder: true,
        run: |g, a| ok(pause::verb(g, a, true)),
    },
    Verb {
        name: "ps",
        about: "ps displays the processes running inside a container",
        usage: "ps [command options] <container-id> [ps options]",
        flags: ps::FLAGS,
        reorder: false,
        run: |g, a| ok(ps::verb(g, a)),
    },
    Verb {
        name: "restore",
        about: "restore a container from a previous checkpoint (not supported)",
        usage: "restore [command options] <container-id>",
        flags: &[],
        reorder: true,
        run: |_, _| {
            Err(Error::Unsupported(
                "restore is not supported by podinit-runc".into(),
            ))
        },
    },
    Verb {
        name: "resume",
        about: "resumes all processes that have been previously paused",
        usage: "resume <container-id>",
        flags: &[],
        reorder: true,
        run: |g, a| ok(pause::verb(g, a, false)),
    },
    Verb {
        name: "run",
        about: "create and run a container",
        usage: "run [command options] <container-id>",
        flags: run::FLAGS,
        reorder: true,
        run: run::verb,
    },
    Verb {
        name: "spec",
        about: "create a new specification file",
        usage: "spec [command options]",
        flags: SPEC_FLAGS,
        reorder: true,
        run: |_, a| ok(write_spec(a)),
    },
    Verb {
        name: "start",
        about: "executes the user defined process in a created container",
        usage: "start <container-id>",
        flags: &[],
        reorder: true,
        run: |g, a| ok(start::verb(g, a)),
    },
    Verb {
        name: "state",
        about: "output the state of a container",
        usage: "state <container-id>",
        flags: &[],
        reorder: true,
        run: |g, a| ok(status::verb(&g.root, a.exactly_one("state")?)),
    },
    Verb {
        name: "update",
        about: "update container resource constraints",
        usage: "update [command options] <container-id>",
        flags: update::FLAGS,
        reorder: true,
        run: |g, a| ok(update::verb(g, a)),
    },
];

const SPEC_FLAGS: &[Flag] = &[
    val(&["bundle", "b"], "path to the root of the bundle directory"),
    bool_(
        &["rootless"],
        "generate a configuration for a rootless container",
    ),
];

/// `spec`: config.json from the template, never over an existing one.
fn write_spec(a: &cli::Args) -> Result<()> {
    if !a.pos.is_empty() {
        return Err(Error::Usage(
            "\"spec\" requires exactly 0 argument(s)".into(),
        ));
    }
    let dir = PathBuf::from(a.value("bundle").unwrap_or("."));
    let path = dir.join("config.json");
    if path.exists() {
        return Err(Error::Other(
            "File config.json exists. Remove it first".into(),
        ));
    }
    let text = spec::render(&spec::template(a.on("rootless")), b"\t");
    std::fs::write(&path, text)
        .map_err(|e| Error::io(format_args!("writing {}", path.display()), e))
}

/// JSON indented as Go's `MarshalIndent` with `indent` (runc: tabs for `spec`, four
/// spaces for `features`).
fn indented(v: &serde_json::Value, indent: &[u8]) -> Result<String> {
    use serde::Serialize;
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(
        &mut out,
        serde_json::ser::PrettyFormatter::with_indent(indent),
    );
    v.serialize(&mut ser)
        .map_err(|e| Error::Other(e.to_string()))?;
    String::from_utf8(out).map_err(|e| Error::Other(e.to_string()))
}

fn version() -> String {
    format!(
        "podinit-runc version {}\nspec: {}\n",
        env!("CARGO_PKG_VERSION"),
        status::OCI_VERSION
    )
}

fn usage() -> String {
    let mut s = String::from(
        "NAME:\n   podinit-runc - runc's command line over podinit's OCI runtime\n\n\
         USAGE:\n   podinit-runc [global options] command [command options] [arguments...]\n\n\
         COMMANDS:\n",
    );
    for v in VERBS {
        s.push_str(&format!("   {:<11} {}\n", v.name, v.about));
    }
    s.push_str("\nGLOBAL OPTIONS:\n");
    s.push_str(&cli::options_help(GLOBAL));
    s.push_str("   --help, -h          show help\n");
    s
}

fn verb_help(v: &Verb) -> String {
    let mut s = format!(
        "NAME:\n   podinit-runc {} - {}\n\nUSAGE:\n   podinit-runc {}\n",
        v.name, v.about, v.usage
    );
    if !v.flags.is_empty() {
        s.push_str("\nOPTIONS:\n");
        s.push_str(&cli::options_help(v.flags));
    }
    s
}

/// Write `text` to stdout; a closed stdout is not worth a panic.
fn print(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_ending_in_runc_speaks_runc() {
        assert!(is_runc_name(std::ffi::OsStr::new("/usr/bin/podinit-runc")));
        assert!(is_runc_name(std::ffi::OsStr::new("runc")));
        assert!(!is_runc_name(std::ffi::OsStr::new("/usr/bin/podinit")));
        assert!(!is_runc_name(std::ffi::OsStr::new("/opt/runc/podinit")));
    }

    #[test]
    fn help_lists_each_verb_with_runcs_line_about_it() {
        let u = usage();
        assert!(
            u.contains("   run         create and run a container\n"),
            "{u}"
        );
        assert!(
            u.contains("   spec        create a new specification file\n"),
            "{u}"
        );
        for v in VERBS {
            assert!(!v.about.is_empty(), "{}", v.name);
            let h = verb_help(v);
            assert!(
                h.starts_with(&format!(
                    "NAME:\n   podinit-runc {} - {}\n",
                    v.name, v.about
                )),
                "{h}"
            );
            assert!(
                h.contains(&format!("USAGE:\n   podinit-runc {}", v.name)),
                "{h}"
            );
        }
    }

    #[test]
    fn global_flags_in_every_spelling() {
        let v = |s: &[&str]| s.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let g = cli::parse(
            GLOBAL,
            &v(&["-root", "/r", "--log=/l", "--debug", "state", "x"]),
            false,
        )
        .unwrap();
        assert_eq!(g.value("root"), Some("/r"));
        assert_eq!(g.value("log"), Some("/l"));
        assert!(g.on("debug"));
        assert_eq!(g.pos, v(&["state", "x"]));
        assert!(cli::parse(GLOBAL, &v(&["-v"]), false)
            .unwrap()
            .on("version"));
    }

    #[test]
    fn documents_indented_as_runc_writes_them() {
        let v = serde_json::json!({"a": [1]});
        assert_eq!(indented(&v, b"\t").unwrap(), "{\n\t\"a\": [\n\t\t1\n\t]\n}");
        assert_eq!(
            indented(&v, b"    ").unwrap(),
            "{\n    \"a\": [\n        1\n    ]\n}"
        );
    }

    #[test]
    fn version_lines_and_verbs_in_order() {
        assert!(version().starts_with("podinit-runc version "));
        assert!(version().contains("\nspec: 1."));
        let names: Vec<&str> = VERBS.iter().map(|v| v.name).collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted);
    }

    #[test]
    fn unsupported_verbs_fail_with_one_line() {
        let tmp = std::env::temp_dir().join(format!("runc-mod-{}", std::process::id()));
        let root = tmp.to_string_lossy().into_owned();
        let s = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(main(s(&["--root", &root, "checkpoint", "x"])), 1);
        // As runc: the flag concerns new containers; list works with it.
        assert_eq!(main(s(&["--root", &root, "--systemd-cgroup", "list"])), 0);
        assert_eq!(main(s(&["--root", &root, "nope"])), 3);
        assert_eq!(main(s(&["--root", &root, "state", "a/b"])), 1);
        assert_eq!(main(s(&["--root", &root, "list", "-q"])), 0);
    }
}
