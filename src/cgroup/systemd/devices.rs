//! A container's device rules as systemd's `DevicePolicy` and `DeviceAllow`, as runc's
//! systemd driver makes them (`devices/systemd.go`): the rules are first reduced to the
//! list they amount to (runc's device emulator, cgroup v1's semantics, the last match
//! winning), then an allow list becomes `DevicePolicy=strict` with one `DeviceAllow`
//! entry a rule. systemd has no deny lists: one that allows everything becomes
//! `DevicePolicy=auto`, any other the strict policy with nothing allowed. The cgroup's
//! own device program is attached afterwards all the same (`Group::confine_devices`), so
//! these properties never widen what the container may use.

use std::collections::BTreeMap;

use super::dbus::Value;
use super::Refused;
use crate::sys::devices::Rule;

const READ: u8 = 1;
const WRITE: u8 = 2;
const MKNOD: u8 = 4;

/// The `*` of a rule's major or minor, ordered first as runc's `-1`.
const ANY: i64 = -1;

/// What a rule matches: type (`'b'` or `'c'`), major, minor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Meta {
    major: i64,
    minor: i64,
    kind: char,
}

/// runc's device emulator: a default (allow or deny everything) and the exceptions to
/// it with their access.
#[derive(Debug, Default, PartialEq)]
struct Emulator {
    default_allow: bool,
    /// Ordered by (major, minor, type), as runc writes them.
    rules: BTreeMap<Meta, u8>,
}

/// Why the emulator refused a rule.
#[derive(Debug, PartialEq, Eq)]
enum BadRule {
    /// A letter of the access that is not `r`, `w` or `m`.
    Access { letter: char, access: String },
    /// An exception that would punch a hole in a wildcard one: the rule, its access, the
    /// wildcard and what it holds.
    Hole {
        rule: Meta,
        perms: u8,
        wildcard: Meta,
        held: u8,
    },
}

impl std::fmt::Display for BadRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BadRule::Access { letter, access } => {
                write!(f, "unknown device access {letter:?} in {access:?}")
            }
            BadRule::Hole {
                rule,
                perms,
                wildcard,
                held,
            } => write!(
                f,
                "device rule {} {}:{} {} cannot punch a hole in the wildcard rule {} {}:{} {}",
                rule.kind,
                num(rule.major),
                num(rule.minor),
                perms_str(*perms),
                wildcard.kind,
                num(wildcard.major),
                num(wildcard.minor),
                perms_str(*held)
            ),
        }
    }
}

fn perms_of(access: &str) -> Result<u8, BadRule> {
    let mut set = 0;
    for c in access.chars() {
        set |= match c {
            'r' => READ,
            'w' => WRITE,
            'm' => MKNOD,
            _ => {
                return Err(BadRule::Access {
                    letter: c,
                    access: access.to_string(),
                })
            }
        };
    }
    Ok(set)
}

fn perms_str(set: u8) -> String {
    [(READ, 'r'), (WRITE, 'w'), (MKNOD, 'm')]
        .iter()
        .filter(|(b, _)| set & b != 0)
        .map(|(_, c)| *c)
        .collect()
}

impl Emulator {
    fn apply(&mut self, r: &Rule) -> Result<(), BadRule> {
        let perms = perms_of(&r.access)?;
        if r.kind == 'a' {
            // `a` resets the whole list to allow (or deny) everything.
            *self = Emulator {
                default_allow: r.allow,
                rules: BTreeMap::new(),
            };
            return Ok(());
        }
        let meta = Meta {
            kind: r.kind,
            major: r.major.unwrap_or(ANY),
            minor: r.minor.unwrap_or(ANY),
        };
        // A rule of the default's own kind removes an exception; the other kind adds one.
        if r.allow == self.default_allow {
            self.remove(meta, perms)
        } else {
            *self.rules.entry(meta).or_insert(0) |= perms;
            Ok(())
        }
    }

    /// runc's `rmRule`: a hole in a wildcard exception is refused, since cgroup v1 would
    /// silently ignore it.
    fn remove(&mut self, meta: Meta, perms: u8) -> Result<(), BadRule> {
        for partial in [
            Meta { major: ANY, ..meta },
            Meta { minor: ANY, ..meta },
            Meta {
                major: ANY,
                minor: ANY,
                ..meta
            },
        ] {
            if partial == meta {
                continue;
            }
            let held = self.rules.get(&partial).copied().unwrap_or(0);
            if held & perms != 0 {
                return Err(BadRule::Hole {
                    rule: meta,
                    perms,
                    wildcard: partial,
                    held,
                });
            }
        }
        if let Some(p) = self.rules.get_mut(&meta) {
            *p &= !perms;
            if *p == 0 {
                self.rules.remove(&meta);
            }
        }
        Ok(())
    }
}

fn num(v: i64) -> String {
    if v == ANY {
        "*".into()
    } else {
        v.to_string()
    }
}

/// The `DeviceAllow` entries of an allow list, for a systemd of `version`, as runc's
/// `systemdProperties` spells them.
fn allow_entries(e: &Emulator, version: u32) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (m, perms) in &e.rules {
        let group = if m.kind == 'b' { "block-" } else { "char-" };
        let path = match (m.major, m.minor) {
            // systemd has no `*:n`: the cgroup's own device program still allows it.
            (ANY, ANY) => format!("{group}*"),
            (ANY, _) => continue,
            (major, ANY) if version >= 240 => format!("{group}{major}"),
            (major, ANY) => match old_group(m.kind, major) {
                Some(g) => g,
                None => continue,
            },
            (major, minor) => {
                let dir = if m.kind == 'b' { "block" } else { "char" };
                let p = format!("/dev/{dir}/{major}:{minor}");
                // Before 240 systemd stats the path and skips what does not exist.
                if version < 240 && !std::path::Path::new(&p).exists() {
                    continue;
                }
                p
            }
        };
        out.push((path, perms_str(*perms)));
    }
    out
}

/// A major number's device group in /proc/devices (`char-pts`), for a systemd older
/// than 240, which has no `char-MAJOR`.
fn old_group(kind: char, major: i64) -> Option<String> {
    let text = std::fs::read_to_string("/proc/devices").ok()?;
    let (prefix, section) = if kind == 'b' {
        ("block-", "Block devices:")
    } else {
        ("char-", "Character devices:")
    };
    let mut inside = false;
    for line in text.lines().map(str::trim) {
        if line.ends_with(':') {
            inside = line == section;
            continue;
        }
        if !inside {
            continue;
        }
        if let Some(name) = line.strip_prefix(&format!("{major} ")) {
            return Some(format!("{prefix}{}", name.trim()));
        }
    }
    None
}

fn device_allow(entries: Vec<(String, String)>) -> Value {
    Value::Array(
        "(ss)".into(),
        entries
            .into_iter()
            .map(|(p, a)| Value::Struct(vec![Value::Str(p), Value::Str(a)]))
            .collect(),
    )
}

/// The device properties of `rules` (in order, as `spec::cgroup_rules` makes them) for a
/// systemd of `version`. An empty `DeviceAllow` comes first: it clears what a unit that
/// exists already was given.
pub fn properties(rules: &[Rule], version: u32) -> Result<Vec<Value>, Refused> {
    let mut e = Emulator::default();
    for r in rules {
        e.apply(r).map_err(|err| {
            Refused::new(
                "DeviceAllow",
                format!("unable to apply device rule for systemd: {err}"),
            )
        })?;
    }
    let clear = Value::property("DeviceAllow", device_allow(Vec::new()));
    let policy = |p: &str| Value::property("DevicePolicy", Value::str(p));
    if e.default_allow {
        if e.rules.is_empty() {
            return Ok(vec![clear, policy("auto")]);
        }
        // As runc: systemd cannot say "all but", so nothing is allowed through systemd;
        // the cgroup's own device program, attached as well, is what allows the rest.
        return Ok(vec![clear, policy("strict")]);
    }
    Ok(vec![
        clear,
        policy("strict"),
        Value::property("DeviceAllow", device_allow(allow_entries(&e, version))),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::devices::{defaults, deny_all};

    fn rule(allow: bool, kind: char, major: Option<i64>, minor: Option<i64>, a: &str) -> Rule {
        Rule {
            allow,
            kind,
            major,
            minor,
            access: a.into(),
        }
    }

    /// The properties as (name, value) with `DeviceAllow`'s entries as pairs.
    fn shown(props: &[Value]) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for p in props {
            let Value::Struct(f) = p else { panic!("{p:?}") };
            let (Value::Str(name), Value::Variant(v)) = (&f[0], &f[1]) else {
                panic!("{p:?}")
            };
            match &**v {
                Value::Str(s) => out.push((name.clone(), s.clone())),
                Value::Array(sig, items) => {
                    assert_eq!(sig, "(ss)");
                    let items: Vec<String> = items
                        .iter()
                        .map(|i| match i {
                            Value::Struct(f) => {
                                format!("{} {}", f[0].as_str().unwrap(), f[1].as_str().unwrap())
                            }
                            _ => panic!("{i:?}"),
                        })
                        .collect();
                    out.push((name.clone(), items.join(", ")));
                }
                other => panic!("{other:?}"),
            }
        }
        out
    }

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn runc_s_default_devices_become_a_strict_allow_list() {
        let p = shown(&properties(&defaults(), 252).unwrap());
        assert_eq!(
            p,
            pairs(&[
                ("DeviceAllow", ""),
                ("DevicePolicy", "strict"),
                (
                    "DeviceAllow",
                    "block-* m, char-* m, /dev/char/1:3 rwm, /dev/char/1:5 rwm, \
                     /dev/char/1:7 rwm, /dev/char/1:8 rwm, /dev/char/1:9 rwm, \
                     /dev/char/5:0 rwm, /dev/char/5:2 rwm, /dev/char/10:200 rwm, \
                     char-136 rwm"
                ),
            ])
        );
    }

    #[test]
    fn later_rules_win_and_access_merges() {
        let rules = [
            deny_all(),
            rule(true, 'c', Some(1), Some(3), "r"),
            rule(true, 'c', Some(1), Some(3), "w"),
            rule(true, 'b', Some(8), Some(0), "rwm"),
            rule(false, 'b', Some(8), Some(0), "wm"),
            rule(true, 'c', Some(4), None, "rw"),
            rule(true, 'c', None, Some(7), "r"),
        ];
        let p = shown(&properties(&rules, 252).unwrap());
        // Sorted by major then minor; `*:7` has no systemd form and is left out.
        assert_eq!(
            p[2].1, "/dev/char/1:3 rw, char-4 rw, /dev/block/8:0 r",
            "{p:?}"
        );
    }

    #[test]
    fn allowing_everything_is_the_auto_policy_and_other_deny_lists_are_strict() {
        let all = [rule(true, 'a', None, None, "rwm")];
        assert_eq!(
            shown(&properties(&all, 252).unwrap()),
            pairs(&[("DeviceAllow", ""), ("DevicePolicy", "auto")])
        );
        // Everything allowed after the defaults (a privileged container).
        let mut privileged = defaults();
        privileged.push(rule(true, 'a', None, None, "rwm"));
        assert_eq!(shown(&properties(&privileged, 252).unwrap())[1].1, "auto");
        let deny_one = [
            rule(true, 'a', None, None, "rwm"),
            rule(false, 'c', Some(1), Some(3), "rwm"),
        ];
        assert_eq!(
            shown(&properties(&deny_one, 252).unwrap()),
            pairs(&[("DeviceAllow", ""), ("DevicePolicy", "strict")])
        );
    }

    #[test]
    fn a_hole_in_a_wildcard_exception_is_refused() {
        let rules = [
            deny_all(),
            rule(true, 'c', Some(4), None, "rw"),
            rule(false, 'c', Some(4), Some(1), "w"),
        ];
        let e = properties(&rules, 252).unwrap_err();
        assert_eq!(e.property, "DeviceAllow");
        assert!(
            e.why.contains("c 4:1 w") && e.why.contains("c 4:* rw"),
            "{}",
            e.why
        );
        // Access the wildcard does not hold may be taken from a node.
        let ok = [
            deny_all(),
            rule(true, 'c', Some(4), None, "r"),
            rule(false, 'c', Some(4), Some(1), "w"),
        ];
        assert!(properties(&ok, 252).is_ok());
    }

    #[test]
    fn old_systemds_get_what_they_can_read() {
        let rules = [
            deny_all(),
            rule(true, 'c', Some(1), None, "rw"),
            rule(true, 'c', Some(99999), Some(1), "rwm"),
            rule(true, 'c', Some(99998), None, "rwm"),
        ];
        let p = shown(&properties(&rules, 239).unwrap());
        // Major 1 is `mem` in every kernel's /proc/devices; the nodes and majors that
        // do not exist are left out, as systemd before 240 would skip them.
        assert_eq!(p[2].1, "char-mem rw");
    }
}
