//! podinit's commands and their options (docs/interface.md §2).

use super::{flag, opt, Cmd, Opt, Pos, Trailing};

const SOCKET: Opt = opt(
    "socket",
    "PATH",
    "The pod's status socket [default: $PODINIT_SOCKET]",
)
.path();
const STATE_ROOT: Opt = opt(
    "state-root",
    "DIR",
    "Where pods are found by name [default: /run/podinit; without root, $XDG_RUNTIME_DIR/podinit]",
)
.path();
const BUNDLES: Opt = opt(
    "bundles",
    "DIR",
    "Where images are resolved to OCI bundles [default: $PODINIT_BUNDLES, else ./oci-bundles]",
)
.path();
const IMAGES: Opt = opt(
    "images",
    "DIR",
    "The image store, for images that are not bundles [default: /var/lib/podinit/images; without root, ~/.local/share/podinit/images]",
)
.path();
const PRESETS: Opt = opt(
    "presets",
    "DIR",
    "Apply the PodPresets of every manifest in DIR too",
)
.path();
const MANIFEST: Pos = Pos {
    name: "POD.yaml",
    help: "The manifest: one v1 Pod, plus ConfigMaps, Secrets and PodPresets (YAML or JSON)",
    choices: &[],
    path: true,
};
const CONTAINER: Pos = Pos {
    name: "CONTAINER",
    help: "The container's name",
    choices: &[],
    path: false,
};

pub static COMMANDS: &[Cmd] = &[
    Cmd {
        name: "run",
        about: "Run the pod in POD.yaml in the foreground until it has ended",
        opts: &[
            BUNDLES,
            IMAGES,
            opt(
                "registry-ca",
                "FILE",
                "PEM CA certificates registries are checked against, beside the system's",
            )
            .path(),
            opt(
                "insecure-registry",
                "HOST[:PORT],...",
                "Registries reached over plain HTTP (loopback ones always are)",
            ),
            PRESETS,
            opt(
                "state-dir",
                "DIR",
                "[default: <state root>/<namespace>_<name>, the state root /run/podinit or, without root, $XDG_RUNTIME_DIR/podinit]",
            )
            .path(),
            opt(
                "cgroup-parent",
                "PATH",
                "Parent cgroup of the pod's [default: the cgroup podinit was started in; with --cgroup-driver systemd, a slice: kubelet's kubepods[-<qos>].slice]",
            ),
            opt(
                "cgroup-driver",
                "DRIVER",
                "Who makes the pod's cgroups, as kubelet's flag: podinit itself, or systemd (a slice for the pod, a scope a container)",
            )
            .choices(&["cgroupfs", "systemd"])
            .default("cgroupfs"),
            opt(
                "socket",
                "PATH",
                "The status socket [default: <state dir>/pod.sock]",
            )
            .path(),
            opt(
                "netns",
                "PATH",
                "Join this network namespace instead of creating one",
            )
            .path(),
            opt(
                "notify-socket",
                "PATH",
                "Push the Pod object as a JSON line on every status change to this Unix socket",
            )
            .path(),
            opt("log-format", "FORMAT", "How podinit writes its own log")
                .choices(&["text", "json"])
                .default("text"),
            flag(
                "quiet",
                Some('q'),
                "No line per event, no pull progress: only warnings and errors",
            ),
            flag(
                "verbose",
                Some('v'),
                "Say every notice, also those said once per machine",
            ),
            opt(
                "max-restart-backoff",
                "SECONDS",
                "The CrashLoopBackOff cap (kubelet's maxContainerRestartPeriod)",
            )
            .default("300"),
            opt(
                "seccomp-root",
                "DIR",
                "Where `Localhost` seccomp profiles are (kubelet's <root-dir>/seccomp)",
            )
            .default(crate::run::DEFAULT_SECCOMP_ROOT)
            .path(),
            opt(
                "node-name",
                "NAME",
                "The node's name, for admission and spec.nodeName [default: the hostname, lowercased]",
            ),
            opt(
                "node-labels",
                "K=V,...",
                "Labels of the node, besides kubelet's own (kubernetes.io/hostname, os, arch)",
            ),
            opt(
                "system-reserved",
                "NAME=QTY,...",
                "cpu, memory, ephemeral-storage kept back from the node's allocatable",
            ),
            opt(
                "node-resources",
                "NAME=COUNT,...",
                "The node's extended resources (e.g. nvidia.com/gpu=1) [default: none]",
            ),
        ],
        args: &[MANIFEST],
        trailing: None,
        pod: false,
    },
    Cmd {
        name: "validate",
        about: "Admit POD.yaml and print the effective pod as YAML",
        opts: &[BUNDLES, IMAGES, PRESETS],
        args: &[MANIFEST],
        trailing: None,
        pod: false,
    },
    Cmd {
        name: "status",
        about: "Show the pod like `kubectl get pod`",
        opts: &[
            STATE_ROOT,
            SOCKET,
            opt("output", "FORMAT", "Output format")
                .short('o')
                .choices(&["table", "wide", "json", "yaml"])
                .default("table"),
        ],
        args: &[],
        trailing: None,
        pod: true,
    },
    Cmd {
        name: "events",
        about: "Show the pod's events like `kubectl events`",
        opts: &[
            STATE_ROOT,
            SOCKET,
            flag("watch", Some('w'), "Keep printing events as they come"),
        ],
        args: &[],
        trailing: None,
        pod: true,
    },
    Cmd {
        name: "logs",
        about: "Print a container's log",
        opts: &[
            STATE_ROOT,
            SOCKET,
            flag("follow", Some('f'), "Keep printing the log as it grows"),
            flag(
                "previous",
                Some('p'),
                "The log of the container's previous run",
            ),
            opt("tail", "LINES", "Only the last LINES lines (-1: all)"),
            flag("timestamps", None, "Each line with its time"),
        ],
        args: &[CONTAINER],
        trailing: None,
        pod: true,
    },
    Cmd {
        name: "exec",
        about: "Run a command in a running container; exits with its exit code",
        opts: &[
            STATE_ROOT,
            SOCKET,
            opt(
                "timeout",
                "SECONDS",
                "Give up (and kill the command) after this many seconds; 0 waits for ever",
            )
            .default("0"),
        ],
        args: &[CONTAINER],
        trailing: Some(Trailing {
            name: "COMMAND",
            required: true,
        }),
        pod: true,
    },
    Cmd {
        name: "attach",
        about:
            "Attach to a running container's output and, with -i, its input (as `kubectl attach`)",
        opts: &[
            STATE_ROOT,
            SOCKET,
            flag(
                "stdin",
                Some('i'),
                "Pass stdin to the container (it needs stdin: true)",
            ),
            flag(
                "tty",
                Some('t'),
                "Stdin is a TTY (the container needs tty: true)",
            ),
        ],
        args: &[CONTAINER],
        trailing: None,
        pod: true,
    },
    Cmd {
        name: "debug",
        about: "Add an ephemeral debug container, show its output, exit with its exit code",
        opts: &[
            STATE_ROOT,
            SOCKET,
            opt(
                "image",
                "IMAGE",
                "The debug container's image (a bundle, or an image of the store or a registry)",
            ),
            opt(
                "target",
                "CONTAINER",
                "Share this container's process namespace",
            ),
            opt("name", "NAME", "[default: debugger-<random>]"),
        ],
        args: &[],
        trailing: Some(Trailing {
            name: "COMMAND",
            required: false,
        }),
        pod: true,
    },
    Cmd {
        name: "condition",
        about: "Set a readiness-gate condition",
        opts: &[
            STATE_ROOT,
            opt("reason", "REASON", "The condition's reason"),
            opt("message", "MESSAGE", "The condition's message"),
            SOCKET,
        ],
        args: &[
            Pos {
                name: "TYPE",
                help: "The condition type, as in the pod's readinessGates",
                choices: &[],
                path: false,
            },
            Pos {
                name: "STATUS",
                help: "The condition's status",
                choices: &["True", "False"],
                path: false,
            },
        ],
        trailing: None,
        pod: true,
    },
    Cmd {
        name: "resize",
        about: "Resize the pod's containers in place (kubectl patch --subresource resize)",
        opts: &[
            opt(
                "patch",
                "JSON",
                "A strategic-merge patch of the containers' resources and spec.resources",
            ),
            STATE_ROOT,
            SOCKET,
        ],
        args: &[],
        trailing: None,
        pod: true,
    },
    Cmd {
        name: "stop",
        about: "Terminate the pod (grace period 0 forces)",
        opts: &[
            STATE_ROOT,
            SOCKET,
            opt(
                "grace-period",
                "SECONDS",
                "[default: the pod's terminationGracePeriodSeconds]",
            ),
        ],
        args: &[],
        trailing: None,
        pod: true,
    },
    Cmd {
        name: "pods",
        about: "List every pod under the state root, running or ended, like `kubectl get pods -A`",
        opts: &[
            STATE_ROOT,
            opt("output", "FORMAT", "Output format")
                .short('o')
                .choices(&["table", "wide", "json"])
                .default("table"),
        ],
        args: &[],
        trailing: None,
        pod: false,
    },
    Cmd {
        name: "rm",
        about: "Remove an ended pod's kept state (its status, events and logs)",
        opts: &[STATE_ROOT],
        args: &[Pos {
            name: "POD",
            help: "The pod: NAME or NAMESPACE/NAME",
            choices: &[],
            path: false,
        }],
        trailing: None,
        pod: false,
    },
    Cmd {
        name: "runc",
        about: "runc's command line over podinit's runtime (`podinit runc --help`; \
                also under a name ending in `runc`, e.g. a link `podinit-runc`; docs/runc.md)",
        opts: &[],
        args: &[],
        trailing: Some(Trailing {
            name: "ARGS",
            required: false,
        }),
        pod: false,
    },
    super::images::CMD,
    Cmd {
        name: "version",
        about: "Print podinit's version",
        opts: &[],
        args: &[],
        trailing: None,
        pod: false,
    },
    Cmd {
        name: "completions",
        about: "Print a completion script for SHELL: bash, zsh or fish \
                (e.g. `podinit completions bash > /etc/bash_completion.d/podinit`)",
        opts: &[],
        args: &[Pos {
            name: "SHELL",
            help: "The shell",
            choices: super::completions::SHELLS,
            path: false,
        }],
        trailing: None,
        pod: false,
    },
];
