//! Picking this machine's manifest from an image index, as containerd's default platform
//! matcher does (os, architecture, variant).

use oci_spec::image::{Descriptor, ImageIndex};

/// An os/architecture/variant triple, normalised as containerd's `platforms.Normalize`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Platform {
    pub os: String,
    pub arch: String,
    /// Empty when not given; a wanted platform without a variant takes any.
    pub variant: String,
}

impl Platform {
    /// Normalises the names the world uses for one architecture (`x86_64`, `aarch64`,
    /// `armhf`…) to the OCI ones, and the default variants away.
    pub fn new(os: &str, arch: &str, variant: &str) -> Platform {
        let os = os.to_lowercase();
        let (arch, variant) = match (arch.to_lowercase().as_str(), variant) {
            ("i386", v) => ("386".to_string(), v.to_string()),
            ("x86_64" | "x86-64" | "amd64", "v1") => ("amd64".into(), String::new()),
            ("x86_64" | "x86-64" | "amd64", v) => ("amd64".into(), v.into()),
            ("aarch64" | "arm64", "8" | "v8") => ("arm64".into(), String::new()),
            ("aarch64" | "arm64", v) => ("arm64".into(), v.into()),
            ("armhf", _) => ("arm".into(), "v7".into()),
            ("armel", _) => ("arm".into(), "v6".into()),
            ("arm", "" | "7") => ("arm".into(), "v7".into()),
            ("arm", "5" | "6" | "8") => ("arm".into(), format!("v{variant}")),
            (a, v) => (a.to_string(), v.to_string()),
        };
        Platform { os, arch, variant }
    }

    /// This machine, as containerd's `platforms.DefaultSpec` sees it.
    pub fn host() -> Platform {
        let arch = match std::env::consts::ARCH {
            "x86" => "386",
            "loongarch64" => "loong64",
            "powerpc64" if cfg!(target_endian = "little") => "ppc64le",
            "powerpc64" => "ppc64",
            a => a,
        };
        Platform::new(std::env::consts::OS, arch, "")
    }

    /// The platforms this one runs, best first: containerd's `platforms.Only` (older
    /// amd64 levels then 386; older arm versions; arm64 runs arm down to v5).
    fn runs(&self) -> Vec<Platform> {
        let mut v = vec![self.clone()];
        let level = |s: &str| s.trim_start_matches('v').parse::<u32>().ok();
        let p = |arch: &str, variant: String| Platform {
            os: self.os.clone(),
            arch: arch.into(),
            variant,
        };
        match self.arch.as_str() {
            "amd64" => {
                if let Some(n) = level(&self.variant).filter(|&n| n > 1) {
                    v.extend((1..n).rev().map(|l| p("amd64", format!("v{l}"))));
                }
                v.push(p("386", String::new()));
            }
            "arm" => {
                if let Some(n) = level(&self.variant).filter(|&n| n > 5) {
                    v.extend((5..n).rev().map(|l| p("arm", format!("v{l}"))));
                }
            }
            "arm64" => {
                let top = level(&self.variant).unwrap_or(8);
                v.extend((5..=top).rev().map(|l| p("arm", format!("v{l}"))));
            }
            _ => {}
        }
        v
    }

    /// containerd's matcher: same os and architecture, and the variant if one is wanted.
    fn matches(&self, have: &Platform) -> bool {
        self.os == have.os
            && self.arch == have.arch
            && (self.variant.is_empty() || self.variant == have.variant)
    }
}

impl std::fmt::Display for Platform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.os, self.arch)?;
        if !self.variant.is_empty() {
            write!(f, "/{}", self.variant)?;
        }
        Ok(())
    }
}

/// The platform a descriptor declares, if any.
fn of(d: &Descriptor) -> Option<Platform> {
    d.platform().as_ref().map(|p| {
        Platform::new(
            &p.os().to_string(),
            &p.architecture().to_string(),
            p.variant().as_deref().unwrap_or(""),
        )
    })
}

/// The manifest of `index` for this machine's OS and architecture, or an error naming the
/// platforms the index has.
pub fn select(index: &ImageIndex) -> Result<&Descriptor, super::Error> {
    select_for(index, &Platform::host())
}

/// The best manifest of `index` for `want`: the first of `want`'s compatible platforms that
/// some entry has, the index's order breaking ties. An entry without a platform is taken
/// only when none has one that fits (containerd treats it as matching).
pub fn select_for<'a>(
    index: &'a ImageIndex,
    want: &Platform,
) -> Result<&'a Descriptor, super::Error> {
    let all = index.manifests();
    for runnable in want.runs() {
        let found = all
            .iter()
            .find(|d| of(d).is_some_and(|have| runnable.matches(&have)));
        if let Some(d) = found {
            return Ok(d);
        }
    }
    if let Some(d) = all.iter().find(|d| d.platform().is_none()) {
        return Ok(d);
    }
    let present: Vec<String> = all
        .iter()
        .filter_map(|d| of(d).map(|p| p.to_string()))
        .collect();
    Err(super::Error::Missing(format!(
        "no manifest for {want} in the index (it has {})",
        if present.is_empty() {
            "no manifests".to_string()
        } else {
            present.join(", ")
        }
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(platforms: &[Option<(&str, &str, &str)>]) -> ImageIndex {
        let manifests: Vec<serde_json::Value> = platforms
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let mut d = serde_json::json!({
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "digest": format!("sha256:{:064x}", i),
                    "size": 1,
                });
                if let Some((os, arch, variant)) = p {
                    let mut pl = serde_json::json!({"os": os, "architecture": arch});
                    if !variant.is_empty() {
                        pl["variant"] = (*variant).into();
                    }
                    d["platform"] = pl;
                }
                d
            })
            .collect();
        serde_json::from_value(serde_json::json!({"schemaVersion": 2, "manifests": manifests}))
            .unwrap()
    }

    fn pick(idx: &ImageIndex, want: Platform) -> Result<String, crate::image::Error> {
        select_for(idx, &want).map(|d| d.digest().to_string())
    }

    fn nth(i: u32) -> String {
        format!("sha256:{i:064x}")
    }

    #[test]
    fn normalises_names() {
        assert_eq!(
            Platform::new("Linux", "x86_64", "").to_string(),
            "linux/amd64"
        );
        assert_eq!(
            Platform::new("linux", "aarch64", "v8").to_string(),
            "linux/arm64"
        );
        assert_eq!(
            Platform::new("linux", "armhf", "").to_string(),
            "linux/arm/v7"
        );
        assert_eq!(
            Platform::new("linux", "arm", "").to_string(),
            "linux/arm/v7"
        );
        assert_eq!(Platform::new("linux", "i386", "").to_string(), "linux/386");
        let h = Platform::host();
        assert_eq!(h.os, "linux");
        assert!(!h.arch.contains('_'), "{h}");
    }

    #[test]
    fn picks_the_machines_platform() {
        let two = index(&[
            Some(("linux", "arm64", "v8")),
            Some(("linux", "amd64", "")),
            Some(("unknown", "unknown", "")),
        ]);
        assert_eq!(
            pick(&two, Platform::new("linux", "x86_64", "")).unwrap(),
            nth(1)
        );
        assert_eq!(
            pick(&two, Platform::new("linux", "aarch64", "")).unwrap(),
            nth(0)
        );
        let e = pick(&two, Platform::new("linux", "s390x", "")).unwrap_err();
        assert_eq!(e.kind(), crate::error::Kind::NotFound);
        assert_eq!(
            e.to_string(),
            "no manifest for linux/s390x in the index (it has linux/arm64, linux/amd64, unknown/unknown)"
        );
        assert!(pick(&two, Platform::new("windows", "amd64", "")).is_err());
    }

    #[test]
    fn falls_back_as_containerd_does() {
        let old = index(&[Some(("linux", "386", "")), Some(("linux", "arm", "v7"))]);
        assert_eq!(
            pick(&old, Platform::new("linux", "amd64", "")).unwrap(),
            nth(0)
        );
        assert_eq!(
            pick(&old, Platform::new("linux", "arm64", "")).unwrap(),
            nth(1)
        );
        assert!(pick(&old, Platform::new("linux", "arm", "v6")).is_err());
        // The exact platform beats a compatible one wherever it is in the index.
        let both = index(&[Some(("linux", "386", "")), Some(("linux", "amd64", ""))]);
        assert_eq!(
            pick(&both, Platform::new("linux", "amd64", "")).unwrap(),
            nth(1)
        );
        let v = index(&[Some(("linux", "arm", "v6")), Some(("linux", "arm", "v7"))]);
        assert_eq!(
            pick(&v, Platform::new("linux", "arm", "v6")).unwrap(),
            nth(0)
        );
        assert_eq!(
            pick(&v, Platform::new("linux", "arm", "v8")).unwrap(),
            nth(1)
        );
        let none = index(&[None]);
        assert_eq!(
            pick(&none, Platform::new("linux", "amd64", "")).unwrap(),
            nth(0)
        );
        let e = pick(&index(&[]), Platform::host()).unwrap_err().to_string();
        assert!(e.ends_with("(it has no manifests)"), "{e}");
    }
}
