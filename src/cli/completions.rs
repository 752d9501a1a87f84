//! Shell completion scripts, from the command table: command names, each command's
//! options, their allowed values, and file names where a path goes.

use super::{commands::COMMANDS, Cmd, Opt};
use std::fmt::Write;

pub const SHELLS: &[&str] = &["bash", "zsh", "fish"];

/// The script for `shell` (one of `SHELLS`).
pub fn script(shell: &str) -> Option<String> {
    match shell {
        "bash" => Some(bash()),
        "zsh" => Some(zsh()),
        "fish" => Some(fish()),
        _ => None,
    }
}

fn names() -> Vec<&'static str> {
    COMMANDS.iter().map(|c| c.name).chain(["help"]).collect()
}

fn switches(o: &Opt) -> Vec<String> {
    let mut v = vec![format!("--{}", o.long)];
    v.extend(o.short.map(|c| format!("-{c}")));
    v
}

fn bash() -> String {
    let mut s = String::from(
        "# bash completion for podinit\n_podinit() {\n    \
         local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}\n    \
         if [[ $COMP_CWORD -eq 1 ]]; then\n",
    );
    let _ = writeln!(
        s,
        "        COMPREPLY=($(compgen -W \"{}\" -- \"$cur\"))\n        return\n    fi",
        names().join(" ")
    );
    s.push_str("    local opts= values= files=\n    case ${COMP_WORDS[1]} in\n");
    for c in COMMANDS {
        let opts: Vec<String> = c
            .opts
            .iter()
            .flat_map(switches)
            .chain(["--help".into()])
            .collect();
        let _ = writeln!(
            s,
            "        {})\n            opts=\"{}\"",
            c.name,
            opts.join(" ")
        );
        s.push_str("            case $prev in\n");
        for o in c.opts.iter().filter(|o| o.value.is_some()) {
            let what = if !o.choices.is_empty() {
                format!("values=\"{}\"", o.choices.join(" "))
            } else if o.path {
                "files=1".into()
            } else {
                "values=".into()
            };
            let _ = writeln!(
                s,
                "                {}) {what}; opts= ;;",
                switches(o).join("|")
            );
        }
        s.push_str("            esac\n");
        if let Some(pos) = c.args.iter().find(|a| !a.choices.is_empty()) {
            let _ = writeln!(
                s,
                "            [[ -z $opts ]] || values=\"{}\"",
                pos.choices.join(" ")
            );
        } else if c.args.iter().any(|a| a.path) {
            s.push_str("            [[ -z $opts ]] || files=1\n");
        }
        s.push_str("            ;;\n");
    }
    s.push_str(
        "    esac\n    \
         if [[ -n $opts && $cur == -* ]]; then\n        \
         COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n    \
         elif [[ -n $files ]]; then\n        \
         COMPREPLY=($(compgen -f -- \"$cur\"))\n    \
         else\n        \
         COMPREPLY=($(compgen -W \"$values\" -- \"$cur\"))\n    \
         fi\n}\ncomplete -o filenames -F _podinit podinit\n",
    );
    s
}

/// Text inside zsh's `[...]` and single quotes.
fn zsh_quote(s: &str) -> String {
    s.replace('\'', "'\\''")
        .replace('[', "\\[")
        .replace(']', "\\]")
        .replace(':', "\\:")
}

fn zsh_value(o_value: &str, choices: &[&str], path: bool) -> String {
    if !choices.is_empty() {
        format!(":{o_value}:({})", choices.join(" "))
    } else if path {
        format!(":{o_value}:_files")
    } else {
        format!(":{o_value}: ")
    }
}

fn zsh_command(s: &mut String, c: &Cmd) {
    let _ = write!(s, "        {})\n            _arguments", c.name);
    for o in c.opts {
        let value = o
            .value
            .map_or(String::new(), |v| zsh_value(v, o.choices, o.path));
        let help = zsh_quote(o.help);
        for sw in switches(o) {
            let eq = if o.value.is_some() && sw.starts_with("--") {
                "="
            } else {
                ""
            };
            let _ = write!(s, " \\\n                '{sw}{eq}[{help}]{value}'");
        }
    }
    let _ = write!(s, " \\\n                '(- *)'{{-h,--help}}'[Print help]'");
    // With an optional POD first, a word's place does not tell which argument it is.
    if c.pod && !c.args.is_empty() {
        s.push_str(" \\\n                '*:POD or argument: '");
    } else if c.pod {
        s.push_str(" \\\n                '1::POD: '");
    } else {
        for (i, a) in c.args.iter().enumerate() {
            let v = zsh_value(a.name, a.choices, a.path);
            let _ = write!(s, " \\\n                '{}{v}'", i + 1);
        }
    }
    if c.trailing.is_some() {
        s.push_str(" \\\n                '*::command: _normal'");
    }
    s.push_str("\n            ;;\n");
}

fn zsh() -> String {
    let mut s = String::from(
        "#compdef podinit\n\n_podinit() {\n    local line state\n    \
         _arguments -C '(- *)'{-h,--help}'[Print help]' '(- *)'{-V,--version}'[Print version]' \
         '1: :->command' '*:: :->args'\n    case $state in\n    command)\n        \
         _values 'command'",
    );
    for c in COMMANDS {
        let _ = write!(s, " '{}[{}]'", c.name, zsh_quote(c.about));
    }
    s.push_str(
        " 'help[Print the help of a command]'\n        ;;\n    args)\n        case $line[1] in\n",
    );
    for c in COMMANDS {
        zsh_command(&mut s, c);
    }
    s.push_str("        esac\n        ;;\n    esac\n}\n\n_podinit \"$@\"\n");
    s
}

fn fish_quote(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))
}

fn fish() -> String {
    let mut s = String::from("# fish completion for podinit\ncomplete -c podinit -f\n");
    for c in COMMANDS {
        let _ = writeln!(
            s,
            "complete -c podinit -n __fish_use_subcommand -a {} -d {}",
            c.name,
            fish_quote(c.about)
        );
    }
    s.push_str(
        "complete -c podinit -n __fish_use_subcommand -a help -d 'Print the help of a command'\n",
    );
    for c in COMMANDS {
        let when = format!("-n '__fish_seen_subcommand_from {}'", c.name);
        for o in c.opts {
            let _ = write!(s, "complete -c podinit {when} -l {}", o.long);
            if let Some(short) = o.short {
                let _ = write!(s, " -s {short}");
            }
            // -x: takes a value, not a file name; -r -F: takes a file name.
            if o.value.is_some() {
                if o.path {
                    s.push_str(" -r -F");
                } else {
                    s.push_str(" -x");
                }
                if !o.choices.is_empty() {
                    let _ = write!(s, " -a {}", fish_quote(&o.choices.join(" ")));
                }
            }
            let _ = writeln!(s, " -d {}", fish_quote(o.help));
        }
        if let Some(a) = c.args.iter().find(|a| !a.choices.is_empty()) {
            let _ = writeln!(
                s,
                "complete -c podinit {when} -a {}",
                fish_quote(&a.choices.join(" "))
            );
        } else if c.args.iter().any(|a| a.path) {
            let _ = writeln!(s, "complete -c podinit {when} -F");
        }
    }
    s
}
