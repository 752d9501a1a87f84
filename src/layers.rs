//! The layer rules of docs/architecture.md §1 ("The layers"), checked by reading the
//! sources: which top-level module each module's code names (`crate::x`, `podinit::x`),
//! and where `unsafe` may be written. A rule broken here is a layer pointing up.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The modules of the crate's top level, as `crate::x` names them.
const MODULES: &[&str] = &[
    "admission",
    "api",
    "bundle",
    "cgroup",
    "cli",
    "image",
    "log",
    "logs",
    "manifest",
    "pod",
    "probe",
    "quantity",
    "run",
    "runc",
    "runtime",
    "sandbox",
    "shim",
    "status",
    "supervisor",
    "sys",
    "tracked",
    "util",
];

/// Which modules the code of a module may name: `Only` lists every one allowed (its own
/// is always allowed), `Not` the ones refused.
enum Rule {
    Only(&'static [&'static str]),
    Not(&'static [&'static str]),
}

/// What the runc and containerd front-ends may not name: the pod's kubelet and sandbox
/// (under the CRI, kubelet is the pod's kubelet).
const NO_KUBELET: &[&str] = &[
    "sandbox",
    "pod",
    "supervisor",
    "manifest",
    "run",
    "admission",
];

/// The rules, by the directory (or file) under src/ that they govern.
const RULES: &[(&str, Rule)] = &[
    ("sys", Rule::Only(&[])),
    ("util.rs", Rule::Only(&["sys"])),
    ("cgroup", Rule::Only(&["sys", "util"])),
    ("runtime", Rule::Only(&["sys", "cgroup", "util", "log"])),
    ("pod", Rule::Only(&["quantity"])),
    ("runc", Rule::Not(NO_KUBELET)),
    ("shim", Rule::Not(NO_KUBELET)),
    ("manifest", Rule::Not(&["sandbox", "supervisor", "run"])),
    ("sandbox", Rule::Not(&["manifest", "supervisor", "run"])),
];

/// Where `unsafe` may appear: the kernel primitives and the runtime's `Kernel` seam.
const UNSAFE_ALLOWED: &[&str] = &["sys", "runtime"];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(p: &Path, out: &mut Vec<PathBuf>) {
    if p.is_file() {
        if p.extension().is_some_and(|e| e == "rs") {
            out.push(p.to_path_buf());
        }
        return;
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(p)
        .unwrap_or_else(|e| panic!("reading {}: {e}", p.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for e in entries {
        rust_files(&e, out);
    }
}

/// The code of a line without its comment and the text of its string literals (a `//`
/// outside a literal starts a comment: good enough for paths and keywords).
fn code(line: &str) -> String {
    // A quote as a character literal opens no string.
    let line = line.replace("'\"'", "' '");
    let mut out = String::with_capacity(line.len());
    let mut in_str = false;
    let mut prev = ' ';
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if prev != '\\' => {
                in_str = !in_str;
                out.push(c);
            }
            '/' if !in_str && chars.peek() == Some(&'/') => break,
            _ if in_str => {}
            _ => out.push(c),
        }
        prev = if prev == '\\' && c == '\\' { ' ' } else { c };
    }
    out
}

/// The top-level modules that `text` names through `crate::` or `podinit::` (braces
/// included: `crate::{a, b::c}`).
fn named_modules(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for line in text.lines().map(code) {
        for prefix in ["crate::", "podinit::"] {
            let mut rest = line.as_str();
            while let Some(i) = rest.find(prefix) {
                let before = rest[..i].chars().next_back();
                rest = &rest[i + prefix.len()..];
                if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                    continue;
                }
                let names: Vec<&str> = match rest.strip_prefix('{') {
                    Some(group) => group
                        .split('}')
                        .next()
                        .unwrap_or("")
                        .split(',')
                        .map(|s| s.trim())
                        .collect(),
                    None => vec![rest],
                };
                for n in names {
                    let head: String = n
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if MODULES.contains(&head.as_str()) {
                        found.insert(head);
                    }
                }
            }
        }
    }
    found
}

fn relative(f: &Path) -> String {
    f.strip_prefix(src()).unwrap().display().to_string()
}

/// Every import of a module that its rule refuses, as `file: names module`.
fn broken_rules() -> Vec<String> {
    let mut broken = Vec::new();
    for (dir, rule) in RULES {
        let own = dir.trim_end_matches(".rs");
        let mut files = Vec::new();
        rust_files(&src().join(dir), &mut files);
        assert!(!files.is_empty(), "no sources under src/{dir}");
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            for m in named_modules(&text) {
                let refused = m != own
                    && match rule {
                        Rule::Only(allowed) => !allowed.contains(&m.as_str()),
                        Rule::Not(refused) => refused.contains(&m.as_str()),
                    };
                if refused {
                    broken.push(format!("src/{}: names `{m}`", relative(&f)));
                }
            }
        }
    }
    broken
}

#[test]
fn every_layer_imports_only_what_its_rule_allows() {
    let broken = broken_rules();
    assert!(
        broken.is_empty(),
        "layer rules broken (docs/architecture.md §1):\n{}",
        broken.join("\n")
    );
}

#[test]
fn unsafe_code_lives_in_sys_and_the_runtime_only() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut found = Vec::new();
    for f in files {
        let rel = relative(&f);
        if UNSAFE_ALLOWED
            .iter()
            .any(|d| rel.starts_with(&format!("{d}/")))
        {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        for (n, line) in text.lines().enumerate() {
            let c = code(line);
            let mut words = c.split(|ch: char| !(ch.is_alphanumeric() || ch == '_'));
            if words.any(|w| w == "unsafe") {
                found.push(format!("src/{rel}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "unsafe outside sys/ and runtime/:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_scanner_finds_paths_braces_and_ignores_comments() {
    let text = "use crate::sys::clone;\nlet g = podinit::cgroup::Group;\n\
                use crate::{pod, util::x};\n// crate::supervisor in a comment\n\
                let s = \"a // b crate::shim\"; crate::runc::main();\nnot_crate::bundle::x();";
    let got: Vec<String> = named_modules(text).into_iter().collect();
    assert_eq!(got, ["cgroup", "pod", "runc", "sys", "util"]);
    let line = concat!("let s = \"un", "safe \\\" x\"; y // z");
    assert_eq!(code(line), "let s = \"\"; y ");
}

#[test]
fn the_rules_name_modules_that_exist() {
    for m in MODULES {
        let dir = src().join(m);
        let file = src().join(format!("{m}.rs"));
        assert!(
            dir.is_dir() || file.is_file(),
            "src/{m} is gone: update MODULES"
        );
    }
}
