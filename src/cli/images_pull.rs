//! `podinit images pull NAME`: pull an image from its registry into the store, with a
//! progress line on a terminal and the digest of what was pulled on stdout at the end.
//! Its options repeat (`--registry-ca`, `--insecure-registry`), so it reads its own words.

use super::Error;
use crate::image::progress::ProgressLine;
use crate::image::reference::Reference;
use crate::image::registry::{self, Credential, Options};
use crate::image::store::{self, Store};
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

const EXIT_USAGE: i32 = 2;

pub const HELP: &str = "\
Pull an image from its registry into the image store; prints its digest

Usage: podinit images pull [OPTIONS] NAME

Arguments:
  NAME  The image: nginx, registry.example:5000/team/app:1, repo@sha256:…

Options:
      --images DIR                  The image store [default: /var/lib/podinit/images;
                                    without root, ~/.local/share/podinit/images]
      --registry-ca FILE            Trust this PEM CA for registries too (repeatable)
      --insecure-registry HOST[:PORT]
                                    Plain HTTP to this registry (repeatable; loopback
                                    registries are plain HTTP unless they speak TLS)
      --creds USER:PASS             The registry's login [default: ~/.docker/config.json]
      --timeout SECONDS             Fail when the registry sends nothing for this long
                                    [default: 300]
  -q, --quiet                       No progress line
  -h, --help                        Print help
";

struct Args {
    name: String,
    images: PathBuf,
    opts: Options,
    creds: Option<(String, String)>,
    quiet: bool,
}

/// Runs `podinit images pull` on the words after `pull`; the exit code.
pub fn main(args: Vec<OsString>) -> i32 {
    let a = match parse(args) {
        Ok(Some(a)) => a,
        Ok(None) => {
            print!("{HELP}");
            return 0;
        }
        Err(e) => {
            crate::log::error(&e.0);
            return EXIT_USAGE;
        }
    };
    match pull(a) {
        Ok(digest) => {
            println!("{digest}");
            0
        }
        Err(e) => super::exit::Failure::from(e).report(),
    }
}

fn parse(args: Vec<OsString>) -> Result<Option<Args>, Error> {
    use lexopt::Arg::{Long, Short, Value};
    let mut p = lexopt::Parser::from_args(args);
    let mut name = None;
    let mut a = Args {
        name: String::new(),
        images: store::default_root(),
        opts: Options::default(),
        creds: None,
        quiet: false,
    };
    let bad = |what: String| Error::usage(Some("images pull"), what);
    let text = |v: OsString, what: &str| {
        v.into_string()
            .map_err(|v| bad(format!("{what}: not valid UTF-8: {v:?}")))
    };
    while let Some(arg) = p.next().map_err(|e| bad(e.to_string()))? {
        match arg {
            Long("help") | Short('h') => return Ok(None),
            Long("quiet") | Short('q') => a.quiet = true,
            Long("images") => a.images = p.value().map_err(|e| bad(e.to_string()))?.into(),
            Long("registry-ca") => a
                .opts
                .ca_files
                .push(p.value().map_err(|e| bad(e.to_string()))?.into()),
            Long("insecure-registry") => {
                let v = text(
                    p.value().map_err(|e| bad(e.to_string()))?,
                    "--insecure-registry",
                )?;
                a.opts.insecure.push(v);
            }
            Long("creds") => {
                let v = text(p.value().map_err(|e| bad(e.to_string()))?, "--creds")?;
                let (u, pw) = v
                    .split_once(':')
                    .ok_or_else(|| bad("--creds: want USER:PASS".into()))?;
                a.creds = Some((u.to_string(), pw.to_string()));
            }
            Long("timeout") => {
                let v = text(p.value().map_err(|e| bad(e.to_string()))?, "--timeout")?;
                let s: u64 = v.parse().ok().filter(|&s| s > 0).ok_or_else(|| {
                    bad(format!(
                        "--timeout: {v:?} is not a whole number of seconds above 0"
                    ))
                })?;
                a.opts.timeout = Some(Duration::from_secs(s));
            }
            Value(v) if name.is_none() => name = Some(text(v, "NAME")?),
            Value(v) => return Err(bad(format!("unexpected argument {v:?}"))),
            other => return Err(bad(other.unexpected().to_string())),
        }
    }
    a.name = name.ok_or_else(|| bad("NAME is missing".into()))?;
    Ok(Some(a))
}

fn pull(mut a: Args) -> Result<String, crate::image::Error> {
    let name = Reference::parse(&a.name)?;
    if let Some((username, password)) = a.creds.take() {
        // Given on the command line, it is for this image's registry.
        a.opts.credentials.push(Credential {
            registry: name.domain.clone(),
            username,
            password,
        });
    }
    let store = Store::open(&a.images)?;
    let mut line = ProgressLine::new(&name.to_string(), !a.quiet);
    let image = registry::pull(&store, &name, &a.opts, &mut |p| line.show(&p));
    line.finish();
    Ok(image?.digest.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<OsString> {
        s.split_whitespace().map(OsString::from).collect()
    }

    #[test]
    fn parses_repeated_options() {
        let a = parse(words(
            "--registry-ca a.pem --insecure-registry r:5000 --registry-ca b.pem \
             --insecure-registry s --creds u:p:x --timeout 7 --images /i -q nginx",
        ))
        .unwrap()
        .unwrap();
        assert_eq!(a.name, "nginx");
        assert_eq!(
            a.opts.ca_files,
            [PathBuf::from("a.pem"), PathBuf::from("b.pem")]
        );
        assert_eq!(a.opts.insecure, ["r:5000", "s"]);
        assert_eq!(a.creds, Some(("u".into(), "p:x".into())));
        assert_eq!(a.opts.timeout, Some(Duration::from_secs(7)));
        assert_eq!((a.images, a.quiet), (PathBuf::from("/i"), true));
        assert!(parse(words("--help")).unwrap().is_none());
    }

    #[test]
    fn refuses_bad_words() {
        for (w, want) in [
            ("", "NAME is missing"),
            ("a b", "unexpected argument"),
            ("--creds u a", "want USER:PASS"),
            ("--timeout 0 a", "whole number"),
            ("--bogus a", "--bogus"),
            ("a --registry-ca", "--registry-ca"),
        ] {
            let e = parse(words(w)).err().unwrap().0;
            assert!(e.contains(want), "{w}: {e}");
        }
    }
}
