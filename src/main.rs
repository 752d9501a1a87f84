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
        /// [default: /run/podinit/<namespace>_<name>]
        #[arg(long)]
        state_dir: Option<PathBuf>,
        /// Parent cgroup of the pod's [default: the cgroup podinit was started in]
        #[arg(long)]
        cgroup_parent: Option<String>,
        #[arg(long, value_enum, default_value = "text")]
        log_format: LogFormat,
        /// The CrashLoopBackOff cap, in seconds (kubelet's maxContainerRestartPeriod).
        #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..))]
        max_restart_backoff: u64,
    },
    /// Admit POD.yaml and print the effective pod as YAML.
    Validate {
        manifest: PathBuf,
        #[arg(long)]
        bundles: Option<PathBuf>,
    },
    /// Print podinit's version.
    Version,
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
            state_dir,
            cgroup_parent,
            log_format,
            max_restart_backoff,
        } => {
            podinit::log::set_json(matches!(log_format, LogFormat::Json));
            podinit::run::run(&podinit::run::RunOptions {
                manifest,
                bundles,
                state_dir,
                cgroup_parent,
                max_restart_backoff,
            })
        }
        Cmd::Validate { manifest, bundles } => {
            let dir = podinit::run::bundles_dir(bundles.as_deref());
            match podinit::run::admit(&manifest, &dir, 300) {
                Ok(a) => {
                    print!("{}", podinit::manifest::effective_yaml_of(&a.pod));
                    0
                }
                Err(e) => {
                    podinit::log::error(&format!("{}: {e}", manifest.display()));
                    podinit::run::EXIT_INVALID
                }
            }
        }
        Cmd::Version => {
            println!("podinit {}", env!("CARGO_PKG_VERSION"));
            0
        }
    };
    std::process::exit(code);
}
