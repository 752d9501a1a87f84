//! `ps`: the container's processes, as the JSON array of their pids or as `ps` prints them
//! (its header and the lines of the container's pids).

use super::cli::{val, Args, Flag};
use super::state;
use super::Globals;

pub const FLAGS: &[Flag] = &[val(
    &["format", "f"],
    "select one of: table or json (default: \"table\")",
)];

pub fn verb(g: &Globals, a: &Args) -> Result<(), super::Error> {
    let id = a.at_least_one("ps")?;
    let s = state::load(&g.root, id)?;
    let group = crate::cgroup::recorded::open(&s.id, s.cgroups_path.as_deref(), &s.cgroup_paths)?;
    let pids = group.pids();
    match a.value("format").unwrap_or("table") {
        "json" => {
            let text = serde_json::to_string(&pids).map_err(|e| e.to_string())?;
            super::print(&format!("{text}\n"));
            Ok(())
        }
        "table" => {
            let ps_args: Vec<String> = if a.pos.len() > 1 {
                a.pos[1..].to_vec()
            } else {
                vec!["-ef".into()]
            };
            let out = std::process::Command::new("ps")
                .args(&ps_args)
                .output()
                .map_err(|e| format!("running ps: {e}"))?;
            if !out.status.success() {
                return Err(super::Error::Other(format!(
                    "ps {}: {}: {}",
                    ps_args.join(" "),
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                )));
            }
            super::print(&filter(&String::from_utf8_lossy(&out.stdout), &pids)?);
            Ok(())
        }
        other => Err(super::Error::Usage(format!(
            "invalid format option: {other}"
        ))),
    }
}

/// `ps`'s header and its lines whose PID column is one of `pids`.
pub fn filter(ps_out: &str, pids: &[i32]) -> super::Result<String> {
    let mut lines = ps_out.lines();
    let header = lines.next().unwrap_or("");
    let col = header
        .split_whitespace()
        .position(|f| f == "PID")
        .ok_or_else(|| super::Error::Other("couldn't find PID field in ps output".into()))?;
    let mut s = format!("{header}\n");
    for l in lines {
        let pid = l.split_whitespace().nth(col).and_then(|p| p.parse().ok());
        if pid.is_some_and(|p: i32| pids.contains(&p)) {
            s.push_str(l);
            s.push('\n');
        }
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_containers_lines_are_kept() {
        let out = "UID        PID  PPID  C STIME TTY          TIME CMD\n\
                   root         1     0  0 15:00 ?        00:00:01 init\n\
                   root     31625     1  0 15:11 ?        00:00:00 sleep 100\n";
        assert_eq!(
            filter(out, &[31625]).unwrap(),
            "UID        PID  PPID  C STIME TTY          TIME CMD\n\
             root     31625     1  0 15:11 ?        00:00:00 sleep 100\n"
        );
        assert_eq!(
            filter("  PID COMMAND\n    7 sh\n", &[7]).unwrap(),
            "  PID COMMAND\n    7 sh\n"
        );
        assert!(filter("USER CMD\n", &[1]).is_err());
    }
}
