//! `list`: every container under `--root`, as runc's table (Go's tabwriter: columns at
//! least 12 wide, 3 spaces of padding) or its JSON array.

use std::os::unix::fs::MetadataExt;

use super::cli::{bool_, val, Args, Flag};
use super::state::{self, State};
use super::status::{self, OciState};
use super::Globals;

pub const FLAGS: &[Flag] = &[
    val(
        &["format", "f"],
        "select one of: table or json (default: \"table\")",
    ),
    bool_(&["quiet", "q"], "display only container IDs"),
];

pub fn verb(g: &Globals, a: &Args) -> Result<(), super::Error> {
    if !a.pos.is_empty() {
        return Err("\"list\" requires exactly 0 argument(s)".into());
    }
    let format = a.value("format").unwrap_or("table");
    if format != "table" && format != "json" {
        return Err(super::Error::Usage(format!(
            "invalid format option: {format}"
        )));
    }
    let found = containers(g)?;
    let rows: Vec<(String, State, status::Status)> = found
        .into_iter()
        .map(|(owner, s)| {
            let st = status::of(&g.root, &s);
            (owner, s, st)
        })
        .collect();
    if a.on("quiet") {
        let ids: String = rows.iter().map(|(_, s, _)| format!("{}\n", s.id)).collect();
        super::print(&ids);
        return Ok(());
    }
    if format == "json" {
        let docs: Vec<OciState> = rows
            .iter()
            .map(|(owner, s, st)| OciState::new(s, *st, owner))
            .collect();
        // As runc (a nil Go slice): no container is `null`.
        let text = if docs.is_empty() {
            "null".to_string()
        } else {
            status::go_escape(&serde_json::to_string(&docs).map_err(|e| e.to_string())?)
        };
        super::print(&format!("{text}\n"));
        return Ok(());
    }
    let mut lines = vec![["ID", "PID", "STATUS", "BUNDLE", "CREATED", "OWNER"].map(String::from)];
    for (owner, s, st) in &rows {
        let doc = OciState::new(s, *st, owner);
        lines.push([
            s.id.clone(),
            doc.pid.to_string(),
            st.as_str().to_string(),
            s.bundle.display().to_string(),
            s.created.clone(),
            owner.clone(),
        ]);
    }
    super::print(&table(&lines));
    Ok(())
}

/// The recorded containers, sorted by ID, with the name of their state's owner.
fn containers(g: &Globals) -> Result<Vec<(String, State)>, super::Error> {
    let entries = match std::fs::read_dir(&g.root.0) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(super::Error::io(
                format_args!("reading {}", g.root.0.display()),
                e,
            ))
        }
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    let mut out = Vec::new();
    for id in names {
        // A half-made container (no state.json yet) is not listed, as in runc.
        let Ok(s) = state::load(&g.root, &id) else {
            continue;
        };
        let uid = std::fs::metadata(g.root.dir(&id))
            .map(|m| m.uid())
            .unwrap_or(0);
        let owner = user_name(uid).unwrap_or_else(|| format!("#{uid}"));
        out.push((owner, s));
    }
    Ok(out)
}

/// The name of `uid` in /etc/passwd, as runc's static build (Go's `osusergo`) looks it
/// up; glibc's `getpwuid_r` in a static binary can load no NSS module anyway.
fn user_name(uid: u32) -> Option<String> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd_name(&passwd, uid)
}

fn passwd_name(passwd: &str, uid: u32) -> Option<String> {
    passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() > 2 && f[2].parse() == Ok(uid)).then(|| f[0].to_string())
    })
}

/// Go's tabwriter with minwidth 12, padding 3: every cell but the last of a line padded
/// to its column's width.
pub fn table<const N: usize>(lines: &[[String; N]]) -> String {
    let mut widths = [0usize; N];
    for l in lines {
        for (w, c) in widths.iter_mut().zip(l.iter()).take(N - 1) {
            *w = (*w).max(c.chars().count() + 3).max(12);
        }
    }
    let mut s = String::new();
    for l in lines {
        for (i, c) in l.iter().enumerate() {
            if i + 1 < N {
                s.push_str(&format!("{c:<w$}", w = widths[i]));
            } else {
                s.push_str(c);
            }
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_are_named_from_passwd() {
        let passwd =
            "root:x:0:0:root:/root:/bin/sh\n# comment\nbad\nu:x:1000:1000::/home/u:/bin/sh\n";
        assert_eq!(passwd_name(passwd, 0).as_deref(), Some("root"));
        assert_eq!(passwd_name(passwd, 1000).as_deref(), Some("u"));
        assert_eq!(passwd_name(passwd, 5), None);
    }

    #[test]
    fn the_table_is_laid_out_as_runc_lays_it_out() {
        let l = |v: [&str; 6]| v.map(String::from);
        let t = table(&[
            l(["ID", "PID", "STATUS", "BUNDLE", "CREATED", "OWNER"]),
            l([
                "c1",
                "31625",
                "created",
                "/tmp/rr/b",
                "2026-11-25T15:11:50.402072914Z",
                "root",
            ]),
        ]);
        assert_eq!(
            t,
            "ID          PID         STATUS      BUNDLE      CREATED                          OWNER\n\
             c1          31625       created     /tmp/rr/b   2026-11-25T15:11:50.402072914Z   root\n"
        );
        let empty = table(&[l(["ID", "PID", "STATUS", "BUNDLE", "CREATED", "OWNER"])]);
        assert_eq!(
            empty,
            "ID          PID         STATUS      BUNDLE      CREATED     OWNER\n"
        );
    }
}
