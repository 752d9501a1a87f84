//! How many bytes a layer may unpack to (docs/images.md §Decompression bombs): a small
//! blob that inflates without end would otherwise fill the store's disk before its diffID
//! could be checked, since a layer's size is known only once it is read to its end.

use crate::image::error::{Error, Result};

/// The environment variable that caps one layer's uncompressed size.
pub const SIZE_VAR: &str = "PODINIT_MAX_LAYER_SIZE";
/// The environment variable that caps one layer's uncompressed size to compressed size.
pub const RATIO_VAR: &str = "PODINIT_MAX_LAYER_RATIO";

/// Default cap on one layer's uncompressed tar: larger than the largest layers of real
/// images (machine-learning images have layers of tens of GiB), small enough that a bomb
/// stops before it fills a node's disk.
pub const DEFAULT_SIZE: u64 = 64 << 30;
/// Default cap on uncompressed ÷ compressed: real layers compress 2–10 times; above 100
/// nearly every byte is a repeat, which is what a bomb is made of.
pub const DEFAULT_RATIO: u64 = 100;
/// Below this size the ratio is not applied: a small layer of zero-filled files may
/// compress far better than 100 times and is no threat to a disk.
pub const RATIO_FLOOR: u64 = 1 << 30;

/// The two caps; `None` is no cap (the variable set to 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub size: Option<u64>,
    pub ratio: Option<u64>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            size: Some(DEFAULT_SIZE),
            ratio: Some(DEFAULT_RATIO),
        }
    }
}

/// The number of bytes a layer may unpack to, and which cap set it (for its error).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cap {
    pub bytes: u64,
    pub by: By,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum By {
    Size,
    Ratio { ratio: u64, compressed: u64 },
}

impl Limits {
    /// The caps the environment sets, the defaults where it sets none.
    pub fn from_env() -> Result<Limits> {
        let var = |name: &str| std::env::var(name).ok();
        Limits::parse(var(SIZE_VAR).as_deref(), var(RATIO_VAR).as_deref())
    }

    /// The caps given as the variables' values: a size is a Kubernetes quantity of bytes
    /// (`64Gi`), a ratio a whole number; 0 turns a cap off.
    pub fn parse(size: Option<&str>, ratio: Option<&str>) -> Result<Limits> {
        let mut l = Limits::default();
        if let Some(s) = size {
            let q = crate::quantity::parse(s.trim())
                .map_err(|e| Error::Setting(format!("{SIZE_VAR}: {e}")))?;
            let v = u64::try_from(q.value())
                .map_err(|_| Error::Setting(format!("{SIZE_VAR}: {s:?} is not a size in bytes")))?;
            l.size = (v > 0).then_some(v);
        }
        if let Some(r) = ratio {
            let v: u64 = r
                .trim()
                .parse()
                .map_err(|_| Error::Setting(format!("{RATIO_VAR}: {r:?} is not a whole number")))?;
            l.ratio = (v > 0).then_some(v);
        }
        Ok(l)
    }

    /// The cap for a layer whose blob is `compressed` bytes: the smaller of the size cap
    /// and the ratio's (never below [`RATIO_FLOOR`]); `None` when neither applies.
    pub fn cap(&self, compressed: u64) -> Option<Cap> {
        let by_size = self.size.map(|bytes| Cap {
            bytes,
            by: By::Size,
        });
        let by_ratio = self.ratio.map(|ratio| Cap {
            bytes: compressed.saturating_mul(ratio).max(RATIO_FLOOR),
            by: By::Ratio { ratio, compressed },
        });
        match (by_size, by_ratio) {
            (Some(s), Some(r)) if r.bytes < s.bytes => Some(r),
            (Some(s), _) => Some(s),
            (None, r) => r,
        }
    }
}

impl Cap {
    /// The error of a layer that went past this cap: one line, with the knob to turn.
    pub fn exceeded(&self) -> Error {
        let what = match self.by {
            By::Size => format!(
                "it unpacks to more than {} bytes, the most a layer may ({SIZE_VAR})",
                self.bytes
            ),
            By::Ratio { ratio, compressed } => format!(
                "it unpacks to more than {} bytes, over {ratio} times its {compressed} \
                 compressed bytes ({RATIO_VAR}): a decompression bomb?",
                self.bytes
            ),
        };
        Error::TooLarge(what)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_values_are_read_as_documented() {
        assert_eq!(Limits::parse(None, None).unwrap(), Limits::default());
        let l = Limits::parse(Some("64Mi"), Some("10")).unwrap();
        assert_eq!(l.size, Some(64 << 20));
        assert_eq!(l.ratio, Some(10));
        assert_eq!(
            Limits::parse(Some("1G"), None).unwrap().size,
            Some(1_000_000_000)
        );
        let off = Limits::parse(Some("0"), Some("0")).unwrap();
        assert_eq!((off.size, off.ratio), (None, None));
        assert_eq!(off.cap(1), None);
    }

    #[test]
    fn bad_values_are_one_line_naming_the_variable() {
        for (size, ratio, want) in [
            (
                Some("lots"),
                None,
                "PODINIT_MAX_LAYER_SIZE: quantities must match",
            ),
            (
                Some("-1Gi"),
                None,
                "PODINIT_MAX_LAYER_SIZE: \"-1Gi\" is not a size",
            ),
            (
                None,
                Some("1.5"),
                "PODINIT_MAX_LAYER_RATIO: \"1.5\" is not a whole number",
            ),
            (None, Some("-3"), "PODINIT_MAX_LAYER_RATIO: \"-3\" is not"),
        ] {
            let e = Limits::parse(size, ratio).unwrap_err().to_string();
            assert!(e.starts_with(want), "{e}");
            assert_eq!(e.lines().count(), 1);
        }
    }

    #[test]
    fn the_smaller_cap_applies_and_the_ratio_never_below_its_floor() {
        let l = Limits::default();
        // A small blob: the floor.
        assert_eq!(
            l.cap(1 << 20),
            Some(Cap {
                bytes: RATIO_FLOOR,
                by: By::Ratio {
                    ratio: 100,
                    compressed: 1 << 20
                }
            })
        );
        // 100 MiB compressed: 100 times it.
        assert_eq!(l.cap(100 << 20).unwrap().bytes, 10_000 << 20);
        // A huge blob: the size cap.
        assert_eq!(
            l.cap(10 << 30),
            Some(Cap {
                bytes: DEFAULT_SIZE,
                by: By::Size
            })
        );
        let size_only = Limits {
            size: Some(5),
            ratio: None,
        };
        assert_eq!(size_only.cap(u64::MAX).unwrap().bytes, 5);
        let ratio_only = Limits {
            size: None,
            ratio: Some(u64::MAX),
        };
        assert_eq!(ratio_only.cap(u64::MAX).unwrap().bytes, u64::MAX);
    }

    #[test]
    fn the_error_names_the_cap_and_its_variable() {
        let e = Limits::default()
            .cap(1 << 20)
            .unwrap()
            .exceeded()
            .to_string();
        assert_eq!(
            e,
            "it unpacks to more than 1073741824 bytes, over 100 times its 1048576 compressed \
             bytes (PODINIT_MAX_LAYER_RATIO): a decompression bomb?"
        );
        let e = Cap {
            bytes: 7,
            by: By::Size,
        }
        .exceeded()
        .to_string();
        assert_eq!(
            e,
            "it unpacks to more than 7 bytes, the most a layer may (PODINIT_MAX_LAYER_SIZE)"
        );
    }
}
