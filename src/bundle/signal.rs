//! Signal names as Kubernetes and OCI write them: `SIGTERM`, `TERM`, `15`, `SIGRTMIN+3`.

use super::Error;

pub fn parse(s: &str) -> Result<i32, Error> {
    let bad = || Error::Signal(s.to_string());
    if let Ok(n) = s.parse::<i32>() {
        return if (1..=libc::SIGRTMAX()).contains(&n) {
            Ok(n)
        } else {
            Err(bad())
        };
    }
    let name = s.strip_prefix("SIG").unwrap_or(s);
    let rt = |base: i32, rest: &str, sign: i32| -> Result<i32, Error> {
        let off: i32 = if rest.is_empty() {
            0
        } else {
            rest.parse().map_err(|_| bad())?
        };
        let n = base + sign * off;
        if (libc::SIGRTMIN()..=libc::SIGRTMAX()).contains(&n) {
            Ok(n)
        } else {
            Err(bad())
        }
    };
    if let Some(rest) = name.strip_prefix("RTMIN") {
        return match rest.strip_prefix('+') {
            Some(r) => rt(libc::SIGRTMIN(), r, 1),
            None if rest.is_empty() => rt(libc::SIGRTMIN(), "", 1),
            None => Err(bad()),
        };
    }
    if let Some(rest) = name.strip_prefix("RTMAX") {
        return match rest.strip_prefix('-') {
            Some(r) => rt(libc::SIGRTMAX(), r, -1),
            None if rest.is_empty() => rt(libc::SIGRTMAX(), "", -1),
            None => Err(bad()),
        };
    }
    format!("SIG{name}")
        .parse::<nix::sys::signal::Signal>()
        .map(|s| s as i32)
        .map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_numbers_and_realtime() {
        assert_eq!(parse("SIGTERM").unwrap(), libc::SIGTERM);
        assert_eq!(parse("TERM").unwrap(), libc::SIGTERM);
        assert_eq!(parse("SIGUSR1").unwrap(), libc::SIGUSR1);
        assert_eq!(parse("9").unwrap(), 9);
        assert_eq!(parse("SIGRTMIN+3").unwrap(), libc::SIGRTMIN() + 3);
        assert_eq!(parse("SIGRTMAX-1").unwrap(), libc::SIGRTMAX() - 1);
        let e = parse("SIGNOPE").unwrap_err();
        assert_eq!(e.to_string(), "invalid signal \"SIGNOPE\"");
        assert!(parse("0").is_err());
        assert!(parse("SIGRTMIN+99").is_err());
    }
}
