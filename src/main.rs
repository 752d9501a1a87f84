//! The command line (CONTRACT.md §2), and nothing else.

use clap::{Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "podinit",
    version,
    about = "Run one Kubernetes pod on bare Linux"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the pod in POD.yaml in the foreground until it has ended.
    Run {
        /// The manifest: one v1 Pod, plus ConfigMaps and Secrets (YAML or JSON).
        manifest: PathBuf,
        /// Where images are resolved to OCI bundles [default: $PODINIT_BUNDLES, else ./oci-bundles]
        #[arg(long)]
        bundles: Option<PathBuf>,
        /// Apply the PodPresets of every manifest in DIR too
        #[arg(long)]
        presets: Option<PathBuf>,
        /// [default: /run/podinit/<namespace>_<name>]
        #[arg(long)]
        state_dir: Option<PathBuf>,
        /// Parent cgroup of the pod's [default: the cgroup podinit was started in]
        #[arg(long)]
        cgroup_parent: Option<String>,
        /// The status socket [default: <state dir>/pod.sock]
        #[arg(long)]
        socket: Option<PathBuf>,
        /// Join this network namespace instead of creating one
        #[arg(long)]
        netns: Option<PathBuf>,
        /// Push the Pod object as a JSON line on every status change to this Unix socket
        #[arg(long)]
        notify_socket: Option<PathBuf>,
        #[arg(long, value_enum, default_value = "text")]
        log_format: LogFormat,
        /// The CrashLoopBackOff cap, in seconds (kubelet's maxContainerRestartPeriod).
        #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..))]
        max_restart_backoff: u64,
        /// Where `Localhost` seccomp profiles are (kubelet's <root-dir>/seccomp)
        #[arg(long, value_name = "DIR", default_value = podinit::run::DEFAULT_SECCOMP_ROOT)]
        seccomp_root: PathBuf,
    },
    /// Admit POD.yaml and print the effective pod as YAML.
    Validate {
        manifest: PathBuf,
        #[arg(long)]
        bundles: Option<PathBuf>,
        /// Apply the PodPresets of every manifest in DIR too
        #[arg(long)]
        presets: Option<PathBuf>,
    },
    /// Show the pod like `kubectl get pod`.
    Status {
        #[arg(long)]
        socket: Option<PathBuf>,
        #[arg(short = 'o', long = "output", value_enum, default_value = "table")]
        output: Output,
    },
    /// Show the pod's events.
    Events {
        #[arg(long)]
        socket: Option<PathBuf>,
        #[arg(short = 'w', long)]
        watch: bool,
    },
    /// Print a container's log.
    Logs {
        container: String,
        #[arg(long)]
        socket: Option<PathBuf>,
        #[arg(short = 'f', long)]
        follow: bool,
        #[arg(short = 'p', long)]
        previous: bool,
        #[arg(long)]
        tail: Option<usize>,
        #[arg(long)]
        timestamps: bool,
    },
    /// Run a command in a running container; exits with its exit code.
    Exec {
        container: String,
        #[arg(long)]
        socket: Option<PathBuf>,
        /// Give up (and kill the command) after this many seconds; 0 waits for ever.
        #[arg(long, default_value_t = 0)]
        timeout: u64,
        #[arg(last = true, required = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// Add an ephemeral debug container, show its output, exit with its exit code.
    Debug {
        #[arg(long)]
        socket: Option<PathBuf>,
        #[arg(long)]
        image: String,
        /// Share this container's process namespace
        #[arg(long)]
        target: Option<String>,
        /// [default: debugger-<random>]
        #[arg(long)]
        name: Option<String>,
        #[arg(last = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// Set a readiness-gate condition.
    Condition {
        #[arg(value_name = "TYPE")]
        type_: String,
        #[arg(value_parser = ["True", "False"])]
        status: String,
        #[arg(long)]
        reason: Option<String>,
        #[arg(long)]
        message: Option<String>,
        #[arg(long)]
        socket: Option<PathBuf>,
    },
    /// Terminate the pod (grace period 0 forces).
    Stop {
        #[arg(long)]
        socket: Option<PathBuf>,
        #[arg(long)]
        grace_period: Option<u64>,
    },
    /// Print podinit's version.
    Version,
    /// Print a completion script for SHELL (e.g. `podinit completions bash > /etc/bash_completion.d/podinit`).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Output {
    Table,
    Wide,
    Json,
    Yaml,
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() {
                podinit::run::EXIT_INVALID
            } else {
                0
            };
            let _ = e.print();
            std::process::exit(code);
        }
    };
    let code = match cli.cmd {
        Cmd::Run {
            manifest,
            bundles,
            presets,
            state_dir,
            cgroup_parent,
            socket,
            netns,
            notify_socket,
            log_format,
            max_restart_backoff,
            seccomp_root,
        } => {
            podinit::log::set_json(matches!(log_format, LogFormat::Json));
            podinit::run::run(&podinit::run::RunOptions {
                manifest,
                bundles,
                presets,
                state_dir,
                cgroup_parent,
                socket,
                netns,
                notify_socket,
                max_restart_backoff,
                seccomp_root: Some(seccomp_root),
            })
        }
        Cmd::Validate {
            manifest,
            bundles,
            presets,
        } => {
            let dir = podinit::run::bundles_dir(bundles.as_deref());
            match podinit::run::admit(&manifest, &dir, presets.as_deref(), 300) {
                Ok(a) => {
                    if let Some(c) = &a.preset_conflict {
                        podinit::log::warn(c);
                    }
                    print!("{}", podinit::manifest::effective_yaml(&a.pod));
                    0
                }
                Err(e) => {
                    podinit::log::error(&format!("{}: {e}", manifest.display()));
                    podinit::run::EXIT_INVALID
                }
            }
        }
        Cmd::Status { socket, output } => client::status(socket, output),
        Cmd::Events { socket, watch } => client::events(socket, watch),
        Cmd::Logs {
            container,
            socket,
            follow,
            previous,
            tail,
            timestamps,
        } => client::logs(socket, &container, follow, previous, tail, timestamps),
        Cmd::Exec {
            container,
            socket,
            timeout,
            command,
        } => client::exec(socket, &container, timeout, command),
        Cmd::Debug {
            socket,
            image,
            target,
            name,
            command,
        } => client::debug(socket, image, target, name, command),
        Cmd::Condition {
            type_,
            status,
            reason,
            message,
            socket,
        } => client::condition(socket, &type_, &status, reason, message),
        Cmd::Stop {
            socket,
            grace_period,
        } => client::stop(socket, grace_period),
        Cmd::Completions { shell } => {
            use clap::CommandFactory;
            clap_complete::generate(
                shell,
                &mut Cli::command(),
                "podinit",
                &mut std::io::stdout(),
            );
            0
        }
        Cmd::Version => {
            println!("podinit {}", env!("CARGO_PKG_VERSION"));
            0
        }
    };
    std::process::exit(code);
}

/// The client commands: one request each over the status socket.
mod client {
    use super::Output;
    use podinit::api::client::{self, Response};
    use std::io::Write;
    use std::path::PathBuf;
    use std::time::Duration;

    const TIMEOUT: Duration = Duration::from_secs(10);

    fn sock(s: Option<PathBuf>) -> Result<PathBuf, String> {
        client::socket_path(s.as_deref())
            .ok_or_else(|| "no socket: give --socket PATH or set $PODINIT_SOCKET".to_string())
    }

    /// Run `f`, print its error as one line; the exit status.
    fn run(f: impl FnOnce() -> Result<i32, String>) -> i32 {
        match f() {
            Ok(code) => code,
            Err(e) => {
                podinit::log::error(&e);
                1
            }
        }
    }

    fn ok(r: Response) -> Result<Response, String> {
        if (200..300).contains(&r.code) {
            Ok(r)
        } else {
            Err(r.error_message())
        }
    }

    fn get(s: &std::path::Path, path: &str) -> Result<Response, String> {
        ok(client::request(s, "GET", path, None, TIMEOUT).map_err(|e| e.to_string())?)
    }

    pub fn status(s: Option<PathBuf>, o: Output) -> i32 {
        run(|| {
            let s = sock(s)?;
            let r = get(&s, "/v1/pod")?;
            let pod: serde_json::Value =
                serde_json::from_slice(&r.body).map_err(|e| e.to_string())?;
            let now = (podinit::util::now_unix_nanos() / 1_000_000_000) as i64;
            let text = match o {
                Output::Table => podinit::status::table::render(&pod, false, now),
                Output::Wide => podinit::status::table::render(&pod, true, now),
                Output::Json => serde_json::to_string_pretty(&pod).unwrap_or_default() + "\n",
                Output::Yaml => serde_yaml_ng::to_string(&pod).unwrap_or_default(),
            };
            print!("{text}");
            Ok(0)
        })
    }

    fn print_event(e: &serde_json::Value) {
        println!(
            "{}\t{}\t{}\t{}\t{}",
            e["lastTimestamp"].as_str().unwrap_or(""),
            e["type"].as_str().unwrap_or(""),
            e["reason"].as_str().unwrap_or(""),
            e["involvedObject"]["fieldPath"].as_str().unwrap_or("pod"),
            e["message"].as_str().unwrap_or("")
        );
    }

    pub fn events(s: Option<PathBuf>, watch: bool) -> i32 {
        run(|| {
            let s = sock(s)?;
            if watch {
                let mut buf = Vec::new();
                let r = client::stream(&s, "/v1/events?watch=true", &mut |d| {
                    buf.extend_from_slice(d);
                    while let Some(n) = buf.iter().position(|&b| b == b'\n') {
                        if let Ok(e) = serde_json::from_slice::<serde_json::Value>(&buf[..n]) {
                            print_event(&e);
                        }
                        buf.drain(..=n);
                    }
                })
                .map_err(|e| e.to_string())?;
                ok(r)?;
                return Ok(0);
            }
            let r = get(&s, "/v1/events")?;
            let v: serde_json::Value =
                serde_json::from_slice(&r.body).map_err(|e| e.to_string())?;
            println!("LAST SEEN\tTYPE\tREASON\tOBJECT\tMESSAGE");
            for e in v["items"].as_array().into_iter().flatten() {
                print_event(e);
            }
            Ok(0)
        })
    }

    pub fn logs(
        s: Option<PathBuf>,
        c: &str,
        follow: bool,
        previous: bool,
        tail: Option<usize>,
        ts: bool,
    ) -> i32 {
        run(|| {
            let s = sock(s)?;
            let mut q = format!(
                "/v1/containers/{c}/log?follow={follow}&previous={previous}&timestamps={ts}"
            );
            if let Some(n) = tail {
                q.push_str(&format!("&tailLines={n}"));
            }
            let mut out = std::io::stdout();
            let r = client::stream(&s, &q, &mut |d| {
                let _ = out.write_all(d);
                let _ = out.flush();
            })
            .map_err(|e| e.to_string())?;
            let r = ok(r)?;
            let _ = out.write_all(&r.body);
            Ok(0)
        })
    }

    /// The state of container `name` in `ephemeralContainerStatuses`.
    fn ephemeral_state(s: &std::path::Path, name: &str) -> Result<serde_json::Value, String> {
        let pod: serde_json::Value = serde_json::from_slice(&get(s, "/v1/pod")?.body)
            .map_err(|e| format!("bad answer from the pod: {e}"))?;
        Ok(pod["status"]["ephemeralContainerStatuses"]
            .as_array()
            .and_then(|v| v.iter().find(|c| c["name"] == name))
            .map(|c| c["state"].clone())
            .unwrap_or_default())
    }

    pub fn debug(
        s: Option<PathBuf>,
        image: String,
        target: Option<String>,
        name: Option<String>,
        command: Vec<String>,
    ) -> i32 {
        run(|| {
            let s = sock(s)?;
            let name = name.unwrap_or_else(|| format!("debugger-{}", podinit::util::random_hex(3)));
            let mut ec = serde_json::json!({"name": name, "image": image});
            if !command.is_empty() {
                ec["command"] = serde_json::json!(command);
            }
            if let Some(t) = target {
                ec["targetContainerName"] = serde_json::json!(t);
            }
            let body = ec.to_string();
            ok(client::request(
                &s,
                "POST",
                "/v1/ephemeralcontainers",
                Some(body.as_bytes()),
                TIMEOUT,
            )
            .map_err(|e| e.to_string())?)?;
            eprintln!("Defaulting debug container name to {name}.");
            // Its output from the start, once it runs, then its exit code.
            loop {
                let st = ephemeral_state(&s, &name)?;
                if st.get("running").is_some() || st.get("terminated").is_some() {
                    break;
                }
                if let Some(w) = st
                    .get("waiting")
                    .filter(|w| w["reason"] != "ContainerCreating")
                {
                    return Err(format!(
                        "container {name}: {}: {}",
                        w["reason"].as_str().unwrap_or(""),
                        w["message"].as_str().unwrap_or("")
                    ));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let mut out = std::io::stdout();
            let r = client::stream(
                &s,
                &format!("/v1/containers/{name}/log?follow=true"),
                &mut |d| {
                    let _ = out.write_all(d);
                    let _ = out.flush();
                },
            )
            .map_err(|e| e.to_string())?;
            let _ = out.write_all(&ok(r)?.body);
            loop {
                let st = ephemeral_state(&s, &name)?;
                if let Some(t) = st.get("terminated") {
                    return Ok(t["exitCode"].as_i64().unwrap_or(1) as i32);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    }

    pub fn condition(
        s: Option<PathBuf>,
        t: &str,
        status: &str,
        reason: Option<String>,
        message: Option<String>,
    ) -> i32 {
        run(|| {
            let s = sock(s)?;
            let body = serde_json::json!({"status": status, "reason": reason, "message": message})
                .to_string();
            let r = client::request(
                &s,
                "PUT",
                &format!("/v1/pod/conditions/{t}"),
                Some(body.as_bytes()),
                TIMEOUT,
            )
            .map_err(|e| e.to_string())?;
            ok(r)?;
            Ok(0)
        })
    }

    pub fn exec(s: Option<PathBuf>, container: &str, timeout: u64, command: Vec<String>) -> i32 {
        run(|| {
            let s = sock(s)?;
            let body =
                serde_json::json!({"command": command, "timeoutSeconds": timeout}).to_string();
            // The answer comes when the command exits.
            let wait = if timeout > 0 {
                Duration::from_secs(timeout + 10)
            } else {
                Duration::from_secs(u32::MAX as u64)
            };
            let r = client::request(
                &s,
                "POST",
                &format!("/v1/containers/{container}/exec"),
                Some(body.as_bytes()),
                wait,
            )
            .map_err(|e| e.to_string())?;
            let r = ok(r)?;
            let v: serde_json::Value = serde_json::from_slice(&r.body)
                .map_err(|e| format!("bad answer from the pod: {e}"))?;
            let _ = std::io::stdout().write_all(v["stdout"].as_str().unwrap_or("").as_bytes());
            let _ = std::io::stderr().write_all(v["stderr"].as_str().unwrap_or("").as_bytes());
            Ok(v["exitCode"].as_i64().unwrap_or(1) as i32)
        })
    }

    pub fn stop(s: Option<PathBuf>, grace: Option<u64>) -> i32 {
        run(|| {
            let s = sock(s)?;
            let body = match grace {
                Some(g) => serde_json::json!({"gracePeriodSeconds": g}).to_string(),
                None => String::new(),
            };
            let r = client::request(
                &s,
                "POST",
                "/v1/pod/terminate",
                Some(body.as_bytes()),
                TIMEOUT,
            )
            .map_err(|e| e.to_string())?;
            ok(r)?;
            Ok(0)
        })
    }
}
