//! Pulling from registries: the OCI distribution protocol over HTTPS (rustls) or plain HTTP
//! for loopback and `--insecure-registry`, with bearer-token and basic auth
//! (docs/images.md §Registries). Each part is a file of `registry/`: `url`, `conn`, `tls` and
//! `proxy` (a connection), `http` (one exchange), `auth` and `credentials` (logins), `client` (a
//! conversation with one repository), `media` (which types are taken), `pull` (fetching an
//! image's content).

mod auth;
mod client;
mod conn;
mod credentials;
mod http;
mod media;
mod proxy;
mod pull;
#[cfg(test)]
mod testserver;
#[cfg(feature = "tls")]
mod tls;
mod url;

use super::digest::Digest;
use super::error::Error;
use super::reference::Reference;
use super::store::{Image, Store};
use std::io::Read;
use std::path::PathBuf;
use std::time::Duration;

/// `Options.timeout` when none is given: CRI's `image_pull_progress_timeout`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

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
pub fn credentials_from_docker_config(json: &[u8]) -> Result<Vec<Credential>, Error> {
    credentials::from_docker_config(json)
}

/// The logins of `creds` for `name`'s repository, the most specific first.
pub fn logins_for<'a>(creds: &'a [Credential], name: &Reference) -> Vec<&'a Credential> {
    credentials::all(creds, &name.domain, &name.path)
}

/// The login of `opts.credentials` a pull of `name` presents, if any.
pub fn login_for<'a>(opts: &'a Options, name: &Reference) -> Option<&'a Credential> {
    credentials::find(&opts.credentials, &name.domain, &name.path)
}

/// Pulls `name` into `store` and names it there.
pub fn pull(
    store: &Store,
    name: &Reference,
    opts: &Options,
    progress: &mut dyn FnMut(Progress),
) -> Result<Image, Error> {
    let top =
        fetch(store, name, opts, progress).map_err(|e| e.within(format_args!("pull {name}")))?;
    let committed = store.commit(name, &top);
    if committed.is_err() {
        // An image that could not be unpacked (a bomb, a bad entry) leaves nothing, as a
        // failed import does: the blobs fetched for it that no name uses go.
        let _ = store.drop_unused(&store.blobs_of(&top));
    }
    committed.map_err(|e| e.within(format_args!("pull {name}")))
}

/// Fetches what `name` needs into `blobs` (staging under the store's root); the digest of
/// its top-level manifest or index.
fn fetch(
    store: &Store,
    name: &Reference,
    opts: &Options,
    progress: &mut dyn FnMut(Progress),
) -> Result<Digest, Error> {
    let mut client = connect(name, opts)?;
    // In the store's scratch space: the same filesystem, held as a writer, so that the
    // next open removes what a crash leaves.
    let (_writing, staging) = store.scratch("pull")?;
    pull::fetch(&mut client, store, &staging, name, progress)
}

/// A client for `name`'s repository with the login that matches it: from
/// `opts.credentials` (imagePullSecrets, `--creds`) first, else `~/.docker/config.json`.
fn connect(name: &Reference, opts: &Options) -> Result<client::Client, Error> {
    let mut login = credentials::find(&opts.credentials, &name.domain, &name.path).cloned();
    if login.is_none() {
        let file = credentials::from_default_file()?;
        login = credentials::find(&file, &name.domain, &name.path).cloned();
    }
    #[cfg(feature = "tls")]
    let tls = tls::config(&opts.ca_files)?;
    #[cfg(not(feature = "tls"))]
    let tls = conn::Tls;
    let net = conn::Net {
        tls,
        timeout: opts.timeout.unwrap_or(DEFAULT_TIMEOUT),
        proxies: proxy::Settings::from_env(),
    };
    client::Client::new(&name.domain, &name.path, &opts.insecure, net, login)
}

impl pull::Blobs for Store {
    fn has_blob(&self, d: &Digest) -> bool {
        Store::has_blob(self, d)
    }

    fn put_blob(&self, d: &Digest, size: Option<u64>, r: &mut dyn Read) -> Result<(), Error> {
        Store::put_blob(self, d, size, r)
    }
}
