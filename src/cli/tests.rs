use super::*;

fn parse_words(words: &[&str]) -> Result<Parsed, Error> {
    parse(words.iter().map(OsString::from))
}

fn matches(words: &[&str]) -> Matches {
    match parse_words(words) {
        Ok(Parsed::Command(m)) => m,
        Ok(_) => panic!("{words:?}: help or version, not a command"),
        Err(e) => panic!("{words:?}: {e}"),
    }
}

fn error(words: &[&str]) -> String {
    match parse_words(words) {
        Err(e) => e.0,
        Ok(_) => panic!("{words:?} was accepted"),
    }
}

#[test]
fn run_takes_the_manifest_and_its_options_in_any_order() {
    let m = matches(&["run", "--bundles", "/b", "pod.yaml", "--state-dir=/s"]);
    assert_eq!(m.cmd.name, "run");
    assert_eq!(m.arg(0), "pod.yaml");
    assert_eq!(m.path("bundles"), Some(PathBuf::from("/b")));
    assert_eq!(m.path("state-dir"), Some(PathBuf::from("/s")));
    assert_eq!(m.path("presets"), None);
}

#[test]
fn defaults_come_from_the_table() {
    let m = matches(&["run", "pod.yaml"]);
    assert_eq!(m.number("max-restart-backoff", 1).unwrap(), Some(300));
    assert_eq!(m.string("log-format").unwrap().as_deref(), Some("text"));
    assert_eq!(
        m.path("seccomp-root"),
        Some(PathBuf::from(crate::run::DEFAULT_SECCOMP_ROOT))
    );
    let m = matches(&["status"]);
    assert_eq!(m.string("output").unwrap().as_deref(), Some("table"));
}

#[test]
fn a_value_may_start_with_a_dash_unless_it_is_an_option() {
    let m = matches(&["exec", "web", "--socket", "-odd", "--", "true"]);
    assert_eq!(m.path("socket"), Some(PathBuf::from("-odd")));
    let m = matches(&["condition", "Ready", "True", "--message", "--not-an-option"]);
    assert_eq!(
        m.string("message").unwrap().as_deref(),
        Some("--not-an-option")
    );
}

#[test]
fn the_last_of_a_repeated_option_wins() {
    let m = matches(&["status", "-o", "json", "--output=yaml"]);
    assert_eq!(m.string("output").unwrap().as_deref(), Some("yaml"));
}

#[test]
fn short_options_cluster_and_take_attached_values() {
    let m = matches(&["logs", "-fp", "web", "--tail", "5"]);
    assert!(m.flag("follow") && m.flag("previous") && !m.flag("timestamps"));
    assert_eq!(m.arg_string(0).unwrap(), "web");
    assert_eq!(m.number("tail", 0).unwrap(), Some(5));
    let m = matches(&["status", "-ojson"]);
    assert_eq!(m.string("output").unwrap().as_deref(), Some("json"));
}

#[test]
fn the_command_after_double_dash_is_taken_word_for_word() {
    let m = matches(&[
        "exec", "web", "--socket", "/s", "--", "ls", "-l", "--", "--help",
    ]);
    assert_eq!(m.arg_string(0).unwrap(), "web");
    assert_eq!(m.trailing, ["ls", "-l", "--", "--help"]);
    assert_eq!(m.path("socket"), Some(PathBuf::from("/s")));
    let m = matches(&["debug", "--image", "busybox"]);
    assert!(m.trailing.is_empty(), "debug's command is optional");
    assert_eq!(m.required("image").unwrap(), "busybox");
}

#[test]
fn wrong_command_lines_name_what_is_wrong() {
    for (words, want) in [
        (&[][..], "no command given"),
        (&["frobnicate"], "unknown command \"frobnicate\""),
        (&["run"], "POD.yaml is missing"),
        (
            &["run", "a.yaml", "b.yaml"],
            "unexpected argument \"b.yaml\"",
        ),
        (&["run", "--nope", "a.yaml"], "unknown option --nope"),
        (
            &["run", "a.yaml", "--bundles"],
            "--bundles needs a value (DIR)",
        ),
        (
            &["run", "a.yaml", "--state-dir", "--bundles", "b"],
            "--state-dir needs a value (DIR)",
        ),
        (
            &["status", "-o", "xml"],
            "--output: \"xml\" is not one of table, wide, json, yaml",
        ),
        (&["events", "--watch=yes"], "--watch takes no value"),
        (
            &["exec", "web"],
            "COMMAND is missing: a COMMAND goes after `--`",
        ),
        (&["exec", "web", "ls"], "a COMMAND goes after `--`"),
        (&["status", "--", "x"], "unexpected `--`"),
        (
            &["condition", "Ready", "Yes"],
            "STATUS: \"Yes\" is not one of True, False",
        ),
        (
            &["completions", "tcsh"],
            "SHELL: \"tcsh\" is not one of bash, zsh, fish",
        ),
    ] {
        let e = error(words);
        assert!(e.contains(want), "{words:?}: {e:?} lacks {want:?}");
        assert!(e.contains("--help`)"), "{words:?}: {e:?} points to no help");
        assert!(!e.contains('\n'), "{words:?}: one line: {e:?}");
    }
}

#[test]
fn numbers_are_checked_when_read() {
    let m = matches(&["run", "a.yaml", "--max-restart-backoff", "0"]);
    let e = m.number("max-restart-backoff", 1).unwrap_err().0;
    assert!(e.contains("--max-restart-backoff: 0 is less than 1"), "{e}");
    let m = matches(&["logs", "web", "--tail", "ten"]);
    let e = m.number("tail", 0).unwrap_err().0;
    assert!(e.contains("--tail: \"ten\" is not a whole number"), "{e}");
    let m = matches(&["debug"]);
    assert!(m
        .required("image")
        .unwrap_err()
        .0
        .contains("--image: is required"));
}

#[test]
fn help_and_version_are_answers_not_errors() {
    for words in [&["--help"][..], &["-h"], &["help"]] {
        let Ok(Parsed::Help(t)) = parse_words(words) else {
            panic!("{words:?}")
        };
        for c in commands::COMMANDS {
            assert!(
                t.contains(&format!("  {} ", c.name)),
                "{words:?} lacks {}",
                c.name
            );
        }
    }
    let Ok(Parsed::Help(t)) = parse_words(&["run", "pod.yaml", "--help"]) else {
        panic!("run --help")
    };
    assert!(t.starts_with("Run the pod in POD.yaml"), "{t}");
    assert!(t.contains("Usage: podinit run [OPTIONS] <POD.yaml>"), "{t}");
    assert!(t.contains("--log-format <FORMAT>"), "{t}");
    assert!(t.contains("[default: text] ") || t.contains("[possible values: text, json]"));
    let Ok(Parsed::Help(t)) = parse_words(&["help", "exec"]) else {
        panic!("help exec")
    };
    assert!(
        t.contains("Usage: podinit exec [OPTIONS] [POD] <CONTAINER> -- <COMMAND>..."),
        "{t}"
    );
    assert!(t.lines().all(|l| l == l.trim_end()), "trailing spaces: {t}");
    assert!(matches!(parse_words(&["--version"]), Ok(Parsed::Version)));
    assert!(matches!(parse_words(&["-V"]), Ok(Parsed::Version)));
}

#[test]
fn every_option_in_the_table_is_unique_within_its_command() {
    for c in commands::COMMANDS {
        for (i, o) in c.opts.iter().enumerate() {
            assert_ne!(o.long, "help", "{}: --help is built in", c.name);
            assert!(
                c.opts[i + 1..]
                    .iter()
                    .all(|p| p.long != o.long && (o.short.is_none() || p.short != o.short)),
                "{}: --{} twice",
                c.name,
                o.long
            );
        }
    }
}

#[test]
fn completions_cover_every_command_and_option() {
    for shell in completions::SHELLS {
        let s = completions::script(shell).unwrap();
        for c in commands::COMMANDS {
            assert!(s.contains(c.name), "{shell} lacks {}", c.name);
            for o in c.opts {
                assert!(s.contains(o.long), "{shell} lacks {} --{}", c.name, o.long);
            }
        }
    }
    let bash = completions::script("bash").unwrap();
    assert!(
        bash.contains("--output|-o) values=\"table wide json yaml\""),
        "{bash}"
    );
    assert!(completions::script("tcsh").is_none());
}

/// The scripts are valid for the shells that are installed here (`-n`: parse only).
#[test]
fn completion_scripts_parse() {
    for shell in completions::SHELLS {
        let Ok(mut child) = std::process::Command::new(shell)
            .arg("-n")
            .stdin(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
        else {
            eprintln!("{shell} is not installed: not checked");
            continue;
        };
        use std::io::Write;
        let script = completions::script(shell).unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(script.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success() && out.stderr.is_empty(),
            "{shell}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn client_commands_take_an_optional_pod_first() {
    let m = matches(&["logs", "c"]);
    assert_eq!(
        (m.pod.as_deref(), m.arg_string(0).unwrap()),
        (None, "c".into())
    );
    let m = matches(&["logs", "prod/web", "c", "-f"]);
    assert_eq!(
        (m.pod.as_deref(), m.arg_string(0).unwrap()),
        (Some("prod/web"), "c".into())
    );
    let m = matches(&["exec", "web", "app", "--", "ls"]);
    assert_eq!(
        (m.pod.as_deref(), m.arg_string(0).unwrap()),
        (Some("web"), "app".into())
    );
    let m = matches(&["status", "web", "--state-root", "/r"]);
    assert_eq!(m.pod.as_deref(), Some("web"));
    assert_eq!(m.path("state-root"), Some(PathBuf::from("/r")));
    assert_eq!(matches(&["status"]).pod, None);
    // The choices of a later word are still checked where it stands.
    let m = matches(&["condition", "web", "example.com/gate", "True"]);
    assert_eq!(m.pod.as_deref(), Some("web"));
    assert_eq!(m.arg_string(1).unwrap(), "True");
    assert!(error(&["condition", "web", "g", "Maybe"]).contains("STATUS"));
    assert!(error(&["status", "a", "b"]).contains("unexpected argument \"b\""));
    // `pods` and `rm` are not client commands of one pod.
    assert!(error(&["pods", "web"]).contains("unexpected argument"));
    assert_eq!(matches(&["rm", "web"]).arg_string(0).unwrap(), "web");
    let Ok(Parsed::Help(t)) = parse_words(&["help", "logs"]) else {
        panic!("help logs")
    };
    assert!(
        t.contains("Usage: podinit logs [OPTIONS] [POD] <CONTAINER>"),
        "{t}"
    );
    assert!(t.contains("--state-root <DIR>"), "{t}");
}
