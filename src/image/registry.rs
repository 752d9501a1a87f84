//! Pulling from registries: the OCI distribution protocol over HTTPS (rustls) or plain HTTP
//! for loopback and `--insecure-registry`, with bearer-token and basic auth.

use super::reference::Reference;
use super::store::{Image, Store};
use std::path::PathBuf;
use std::time::Duration;

/// How to reach registries.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Extra CA certificates (`--registry-ca`), beside the system's roots.
    pub ca_files: Vec<PathBuf>,
    /// `--insecure-registry HOST[:PORT]`: plain HTTP.
    pub insecure: Vec<String>,
    pub credentials: Vec<Credential>,
    /// No progress for this long fails the pull (a registry that hangs).
    pub timeout: Option<Duration>,
}

/// A login for one registry, from a `kubernetes.io/dockerconfigjson` Secret or
/// `~/.docker/config.json`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credential {
    /// The registry host (`registry.example:5000`); `docker.io` for Docker Hub.
    pub registry: String,
    pub username: String,
    pub password: String,
}

/// Where a pull is, for events and a terminal progress line.
#[derive(Clone, Debug)]
pub enum Progress {
    Resolved {
        digest: String,
    },
    Blob {
        digest: String,
        done: u64,
        total: u64,
    },
}

/// Parses a docker config JSON (`.dockerconfigjson` or `~/.docker/config.json`: `auths`
/// with `auth` base64 or `username`/`password`).
pub fn credentials_from_docker_config(json: &[u8]) -> Result<Vec<Credential>, String> {
    let _ = json;
    todo!("image::registry::credentials_from_docker_config")
}

/// Pulls `name` into `store` and names it there.
pub fn pull(
    store: &Store,
    name: &Reference,
    opts: &Options,
    progress: &mut dyn FnMut(Progress),
) -> Result<Image, String> {
    let _ = (store, name, opts, progress);
    todo!("image::registry::pull")
}
