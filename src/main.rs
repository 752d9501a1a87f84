//! The command line (docs/interface.md §2; its grammar is `podinit::cli`), and nothing else.

use podinit::cli::exit::Failure;
use podinit::cli::{self, client, Matches, Parsed};
use std::path::PathBuf;

fn main() {
    // runc's command line: under a runc name, or `podinit runc …`.
    let mut args = std::env::args_os();
    let argv0 = args.next().unwrap_or_default();
    if podinit::runc::is_runc_name(&argv0) {
        std::process::exit(podinit::runc::main(args.collect()));
    }
    let rest: Vec<_> = args.collect();
    if rest.first().is_some_and(|a| a == "images" || a == "run") {
        // Without root, the image store and the pod live in the user's own namespace.
        if let Err(e) = podinit::run::rootless::enter_if_unprivileged() {
            std::process::exit(Failure::Sandbox(e.to_string()).report());
        }
    }
    if rest.first().is_some_and(|a| a == "images") {
        std::process::exit(podinit::cli::images::main(rest[1..].to_vec()));
    }
    if rest.first().is_some_and(|a| a == "runc") {
        std::process::exit(podinit::runc::main(rest[1..].to_vec()));
    }
    let m = match cli::parse(std::env::args_os().skip(1)) {
        Ok(Parsed::Command(m)) => m,
        Ok(Parsed::Help(text)) => {
            print!("{text}");
            std::process::exit(0);
        }
        Ok(Parsed::Version) => version(),
        Err(e) => usage_error(e),
    };
    let code = dispatch(&m).unwrap_or_else(|e| usage_error(e));
    std::process::exit(code);
}

fn version() -> ! {
    println!("podinit {}", env!("CARGO_PKG_VERSION"));
    std::process::exit(0);
}

fn usage_error(e: cli::Error) -> ! {
    std::process::exit(Failure::Invalid(e.0).report());
}

/// `--state-root`, where pods are found by name.
fn state_root(m: &Matches) -> PathBuf {
    m.path("state-root")
        .unwrap_or_else(podinit::run::state_root)
}

/// For an option whose default is in `cli::commands`, so that it is always there.
const DEFAULTED: &str = "the command table gives it a default";

/// Run the command; a value the grammar cannot check (a number, UTF-8) is a usage error.
fn dispatch(m: &Matches) -> Result<i32, cli::Error> {
    let socket = || m.path("socket");
    let pick = || client::Pick {
        pod: m.pod.clone(),
        socket: socket(),
        root: state_root(m),
    };
    Ok(match m.cmd.name {
        "run" => {
            podinit::log::set_json(m.string("log-format")?.as_deref() == Some("json"));
            if let Err(e) = podinit::runtime::seal_own_binary() {
                podinit::log::warn(&format!(
                    "running from a read-only copy of the binary: {e}; it stays writable \
                     to containers that reach /proc/PID/exe"
                ));
            }
            podinit::log::set_quiet(m.flag("quiet"));
            podinit::log::set_verbose(m.flag("verbose"));
            podinit::run::run(&podinit::run::RunOptions {
                manifest: PathBuf::from(m.arg(0)),
                bundles: m.path("bundles"),
                images: m.path("images"),
                registry_ca: m.path("registry-ca").into_iter().collect(),
                insecure_registries: m
                    .string("insecure-registry")?
                    .map(|s| {
                        s.split(',')
                            .filter(|h| !h.is_empty())
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default(),
                presets: m.path("presets"),
                state_dir: m.path("state-dir"),
                cgroup_parent: m.string("cgroup-parent")?,
                cgroup_driver: match m.string("cgroup-driver")?.as_deref() {
                    Some("systemd") => podinit::run::CgroupDriver::Systemd,
                    _ => podinit::run::CgroupDriver::Cgroupfs,
                },
                socket: socket(),
                netns: m.path("netns"),
                notify_socket: m.path("notify-socket"),
                max_restart_backoff: m.number("max-restart-backoff", 1)?.expect(DEFAULTED),
                seccomp_root: m.path("seccomp-root"),
                node_name: m.string("node-name")?,
                node_labels: m.string("node-labels")?,
                system_reserved: m.string("system-reserved")?,
                node_resources: m.string("node-resources")?,
            })
        }
        "validate" => {
            let manifest = PathBuf::from(m.arg(0));
            let paths = podinit::run::DirPaths::of(
                m.path("bundles").as_deref(),
                m.path("images").as_deref(),
            );
            match podinit::run::admit_manifest(
                &manifest,
                paths.dirs(),
                m.path("presets").as_deref(),
                300,
            ) {
                Ok(a) => {
                    if let Some(c) = &a.preset_conflict {
                        podinit::log::warn(c);
                    }
                    print!("{}", podinit::manifest::effective_yaml(&a.pod));
                    0
                }
                Err(e) => Failure::Invalid(format!("{}: {e}", manifest.display())).report(),
            }
        }
        "status" => client::status(pick(), &m.string("output")?.expect(DEFAULTED)),
        "events" => client::events(pick(), m.flag("watch")),
        "logs" => client::logs(
            pick(),
            &m.arg_string(0)?,
            m.flag("follow"),
            m.flag("previous"),
            // As kubectl: -1 (its default) is every line.
            match m.string("tail")?.as_deref() {
                Some("-1") => None,
                _ => m.number("tail", 0)?,
            },
            m.flag("timestamps"),
        ),
        "exec" => client::exec(
            pick(),
            &m.arg_string(0)?,
            m.number("timeout", 0)?.expect(DEFAULTED),
            m.trailing.clone(),
        ),
        "attach" => client::attach(pick(), &m.arg_string(0)?, m.flag("stdin"), m.flag("tty")),
        "debug" => client::debug(
            pick(),
            m.required("image")?,
            m.string("target")?,
            m.string("name")?,
            m.trailing.clone(),
        ),
        "condition" => client::condition(
            pick(),
            &m.arg_string(0)?,
            &m.arg_string(1)?,
            m.string("reason")?,
            m.string("message")?,
        ),
        "stop" => client::stop(pick(), m.number("grace-period", 0)?),
        "pods" => client::pods(&state_root(m), &m.string("output")?.expect(DEFAULTED)),
        "rm" => client::rm(&m.arg_string(0)?, &state_root(m)),
        "resize" => client::resize(pick(), &m.required("patch")?),
        "completions" => {
            let shell = m.arg_string(0)?;
            print!(
                "{}",
                cli::completions::script(&shell).expect("a checked choice")
            );
            0
        }
        "version" => version(),
        // Reached only when runc's arguments follow `--`: `podinit runc …` is taken above.
        "images" => podinit::cli::images::main(m.trailing.iter().map(Into::into).collect()),
        "runc" => podinit::runc::main(m.trailing.iter().map(Into::into).collect()),
        other => unreachable!("command {other} is in the table but not dispatched"),
    })
}
