//! Kubernetes resource quantities (`100m`, `1.5`, `128Mi`, `1G`, `1e3`), exactly enough to
//! compare them and turn them into cgroup values: milli-units, rounded up as Kubernetes'
//! `MilliValue` and `Value` do.

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Quantity {
    milli: i128,
}

const LIMIT: i128 = 1 << 100;

impl Quantity {
    /// The value × 1000, rounded up (CPU in millicores).
    pub fn milli(self) -> i128 {
        self.milli
    }
    /// The value rounded up to an integer (memory in bytes).
    pub fn value(self) -> i128 {
        ceil_div(self.milli, 1000)
    }
    pub fn is_zero(self) -> bool {
        self.milli == 0
    }
}

fn ceil_div(a: i128, b: i128) -> i128 {
    let q = a / b;
    if a % b != 0 && (a > 0) == (b > 0) {
        q + 1
    } else {
        q
    }
}

/// Why a text is not a quantity, in the API server's words: the text as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// Not of a quantity's form.
    Syntax(String),
    /// Beyond what a quantity holds.
    TooLarge(String),
    /// A `hugepages-<size>` whose size is no page size (in bytes, KB, MB or GB).
    PageSize(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Syntax(s) => write!(f, "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {s:?}"),
            Error::TooLarge(s) => write!(f, "quantity {s:?} is too large"),
            Error::PageSize(size) => write!(f, "hugepages-{size}: not a supported page size"),
        }
    }
}

crate::error::layer_error!(Error);

pub fn parse(s: &str) -> Result<Quantity, Error> {
    let bad = || Error::Syntax(s.to_string());
    let large = || Error::TooLarge(s.to_string());
    let (neg, body) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let num_end = body
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(body.len());
    let (num, suffix) = body.split_at(num_end);
    if num.is_empty() || num == "." || num.matches('.').count() > 1 {
        return Err(bad());
    }
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    let (mut exp10, bin): (i32, u32) = match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        e if e.starts_with(['e', 'E']) => (e[1..].parse::<i32>().map_err(|_| bad())?, 0),
        _ => return Err(bad()),
    };
    let digits = format!("{int}{frac}");
    let digits = digits.trim_start_matches('0');
    if digits.len() > 30 {
        return Err(large());
    }
    let mut n: i128 = if digits.is_empty() {
        0
    } else {
        digits.parse().map_err(|_| bad())?
    };
    exp10 += 3 - frac.len() as i32;
    n = n.checked_mul(1i128 << bin).ok_or_else(large)?;
    if exp10 >= 0 {
        for _ in 0..exp10 {
            n = n.checked_mul(10).filter(|v| *v < LIMIT).ok_or_else(large)?;
        }
    } else {
        let mut d: i128 = 1;
        for _ in 0..(-exp10).min(38) {
            d *= 10;
        }
        n = ceil_div(n, d);
    }
    Ok(Quantity {
        milli: if neg { -n } else { n },
    })
}

/// `hugepages-2Mi`'s size as the cgroup files name it (`2MB`).
pub fn hugepage_size(size: &str) -> Result<String, Error> {
    let bytes = parse(size)?.value();
    for (u, name) in [(1i128 << 30, "GB"), (1 << 20, "MB"), (1 << 10, "KB")] {
        if bytes >= u && bytes % u == 0 {
            return Ok(format!("{}{name}", bytes / u));
        }
    }
    Err(Error::PageSize(size.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values() {
        assert_eq!(parse("100m").unwrap().milli(), 100);
        assert_eq!(parse("1.5").unwrap().milli(), 1500);
        assert_eq!(parse("2").unwrap().milli(), 2000);
        assert_eq!(parse("128Mi").unwrap().value(), 128 << 20);
        assert_eq!(parse("1G").unwrap().value(), 1_000_000_000);
        assert_eq!(parse("1e3").unwrap().value(), 1000);
        assert_eq!(parse("1E").unwrap().value(), 1_000_000_000_000_000_000);
        assert_eq!(parse("0.5Gi").unwrap().value(), 1 << 29);
        assert_eq!(parse("1n").unwrap().milli(), 1, "rounded up");
        assert_eq!(parse("0").unwrap().milli(), 0);
        assert_eq!(parse("-1").unwrap().milli(), -1000);
    }

    #[test]
    fn errors() {
        for s in ["", "abc", "1x", "1.2.3", "Mi", "1Mb", "."] {
            assert!(parse(s).is_err(), "{s}");
        }
        assert!(parse("1e100").is_err());
    }

    #[test]
    fn hugepage_sizes() {
        assert_eq!(hugepage_size("2Mi").unwrap(), "2MB");
        assert_eq!(hugepage_size("1Gi").unwrap(), "1GB");
        assert!(hugepage_size("3").is_err());
    }

    #[test]
    fn order() {
        assert!(parse("1Gi").unwrap() > parse("1G").unwrap());
        assert_eq!(parse("1000m").unwrap(), parse("1").unwrap());
    }
}
