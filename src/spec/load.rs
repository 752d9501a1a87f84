//! Reading a bundle's `config.json`: once per verb, into the typed spec every later step
//! edits or reads.

use oci_spec::runtime::Spec;
use std::collections::HashMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// Why a `config.json` could not be had; each front-end words it its way.
#[derive(Debug)]
pub enum LoadError {
    Read(PathBuf, io::Error),
    /// Not an OCI spec: the path of the field that is wrong and why.
    Parse(PathBuf, crate::tracked::ReadError),
}

impl LoadError {
    /// The file is not there at all.
    pub fn is_missing(&self) -> bool {
        matches!(self, LoadError::Read(_, e) if e.kind() == io::ErrorKind::NotFound)
    }
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::Read(p, e) => write!(f, "reading {}: {e}", p.display()),
            LoadError::Parse(p, e) => write!(f, "parsing {}: {e}", p.display()),
        }
    }
}

/// `<bundle>/config.json` as a typed spec.
pub fn load(bundle: &Path) -> Result<Spec, LoadError> {
    let (path, text) = read(bundle)?;
    crate::tracked::from_slice(&text).map_err(|e| LoadError::Parse(path, e))
}

/// `<bundle>/config.json`'s annotations alone, every other field skipped as it is read
/// (no tree of the document is built, no typed spec): for a caller that needs no more of
/// it (the shim's `start`, once per pod, on the path of RunPodSandbox) and leaves the
/// whole spec to the verb that uses it.
pub fn annotations(bundle: &Path) -> Result<HashMap<String, String>, LoadError> {
    #[derive(serde::Deserialize)]
    struct Annotated {
        #[serde(default)]
        annotations: Option<HashMap<String, String>>,
    }
    let (path, text) = read(bundle)?;
    serde_json::from_slice::<Annotated>(&text)
        .map(|a| a.annotations.unwrap_or_default())
        .map_err(|err| LoadError::Parse(path, crate::tracked::ReadError { path: None, err }))
}

fn read(bundle: &Path) -> Result<(PathBuf, Vec<u8>), LoadError> {
    let path = bundle.join("config.json");
    match std::fs::read(&path) {
        Ok(t) => Ok((path, t)),
        Err(e) => Err(LoadError::Read(path, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_say_which_file_and_what() {
        let d =
            std::env::temp_dir().join(format!("podinit-specload-{}", crate::util::random_hex(4)));
        std::fs::create_dir_all(&d).unwrap();
        let e = load(&d).unwrap_err();
        assert!(e.is_missing());
        assert!(
            e.to_string()
                .starts_with(&format!("reading {}/config.json: ", d.display())),
            "{e}"
        );
        std::fs::write(
            d.join("config.json"),
            r#"{"ociVersion": "1.0.2", "process": {"cwd": 1}}"#,
        )
        .unwrap();
        let e = load(&d).unwrap_err();
        assert!(!e.is_missing());
        assert!(e.to_string().contains("process.cwd"), "{e}");
        std::fs::write(d.join("config.json"), r#"{"ociVersion": "1.0.2"}"#).unwrap();
        assert_eq!(load(&d).unwrap().version(), "1.0.2");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
