//! `--help` text, from the command table.

use super::{commands::COMMANDS, Cmd};
use std::fmt::Write;

pub fn top() -> String {
    let mut s = String::from("Run one Kubernetes pod on bare Linux\n\nUsage: podinit <COMMAND>\n");
    let mut rows: Vec<(String, String)> = COMMANDS
        .iter()
        .map(|c| (c.name.to_string(), c.about.to_string()))
        .collect();
    rows.push((
        "help".into(),
        "Print this message or the help of a command".into(),
    ));
    section(&mut s, "Commands", &rows);
    section(
        &mut s,
        "Options",
        &[
            ("-h, --help".into(), "Print help".into()),
            ("-V, --version".into(), "Print version".into()),
        ],
    );
    s
}

pub fn command(c: &Cmd) -> String {
    let mut usage = format!("podinit {}", c.name);
    if !c.opts.is_empty() {
        usage.push_str(" [OPTIONS]");
    }
    if c.pod {
        usage.push_str(" [POD]");
    }
    for a in c.args {
        let _ = write!(usage, " <{}>", a.name);
    }
    if let Some(t) = &c.trailing {
        let _ = match t.required {
            true => write!(usage, " -- <{}>...", t.name),
            false => write!(usage, " [-- <{}>...]", t.name),
        };
    }
    let mut s = format!("{}\n\nUsage: {usage}\n", c.about);
    let pod = c.pod.then(|| {
        (
            "[POD]".to_string(),
            "The pod, NAME or NAMESPACE/NAME, under --state-root [default: --socket, else \
             $PODINIT_SOCKET, else the only pod there]"
                .to_string(),
        )
    });
    let args: Vec<(String, String)> = pod
        .into_iter()
        .chain(
            c.args
                .iter()
                .map(|a| (format!("<{}>", a.name), with_choices(a.help, a.choices))),
        )
        .collect();
    section(&mut s, "Arguments", &args);
    let mut opts: Vec<(String, String)> = c
        .opts
        .iter()
        .map(|o| {
            let mut left = match o.short {
                Some(c) => format!("-{c}, --{}", o.long),
                None => format!("    --{}", o.long),
            };
            if let Some(v) = o.value {
                let _ = write!(left, " <{v}>");
            }
            let mut help = with_choices(o.help, o.choices);
            if let Some(d) = o.default {
                let _ = write!(help, " [default: {d}]");
            }
            (left, help)
        })
        .collect();
    opts.push(("-h, --help".into(), "Print help".into()));
    section(&mut s, "Options", &opts);
    s
}

fn with_choices(help: &str, choices: &[&str]) -> String {
    match choices {
        [] => help.to_string(),
        c => format!("{help} [possible values: {}]", c.join(", ")),
    }
}

fn section(s: &mut String, title: &str, rows: &[(String, String)]) {
    if rows.is_empty() {
        return;
    }
    let width = rows.iter().map(|(l, _)| l.len()).max().unwrap_or(0);
    let _ = writeln!(s, "\n{title}:");
    for (l, r) in rows {
        // No trailing spaces where a row has no help.
        let _ = writeln!(s, "{}", format!("  {l:width$}  {r}").trim_end());
    }
}
