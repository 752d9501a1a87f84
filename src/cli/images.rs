//! `podinit images import|ls|rm` (docs/images.md): the image store's commands, with their
//! own small grammar under `images`, as `runc` has its own. `images pull` is
//! `cli::images_pull`'s.

use super::{opt, Cmd, Error, Opt, Trailing};
use crate::image::store::{Store, DEFAULT_ROOT};
use std::ffi::OsString;
use std::path::PathBuf;

/// `--images DIR`, for `images` and for the commands that run images.
pub const IMAGES: Opt = opt("images", "DIR", "The image store (docs/images.md)")
    .default(DEFAULT_ROOT)
    .path();

/// The entry in `podinit --help` and the completions.
pub const CMD: Cmd = Cmd {
    name: "images",
    about: "Manage the image store: `images import FILE|DIR [--name NAME]`, `images ls [-q]`, \
            `images rm [--force] NAME|DIGEST...`, `images pull NAME` (`podinit images --help`)",
    opts: &[IMAGES],
    args: &[],
    trailing: Some(Trailing {
        name: "ARGS",
        required: false,
    }),
    pod: false,
};

const HELP: &str = "\
Manage the image store (docs/images.md)

Usage: podinit images [--images DIR] <COMMAND> [ARGS]

Commands:
  import FILE|DIR [--name NAME]   Import an OCI image layout, an oci-archive or a docker save archive
  ls [-q|--quiet]                 List the images: NAME, DIGEST, SIZE (-q: names only)
  rm [-f|--force] NAME|DIGEST...  Remove images; blobs and layers no other image uses go too;
                                  a name a running container uses is refused (-f: removed)
  pull NAME                       Pull an image from its registry (`podinit images pull --help`)

Options:
  --images <DIR>  The image store [default: /var/lib/podinit/images;
                  without root, ~/.local/share/podinit/images]
  -h, --help      Print help
";

/// Each verb's own `--help`, as `images pull --help` has its own.
const IMPORT_HELP: &str = "\
Import an OCI image layout, an oci-archive or a docker save archive; prints each image's
name and digest

Usage: podinit images [--images DIR] import [--name NAME] FILE|DIR

Arguments:
  FILE|DIR  The layout's directory, or the archive

Options:
      --name NAME   Name the archive's one image NAME instead of what the archive says
      --images DIR  The image store [default: /var/lib/podinit/images;
                    without root, ~/.local/share/podinit/images]
  -h, --help        Print help
";

const LS_HELP: &str = "\
List the images: NAME, DIGEST, SIZE

Usage: podinit images [--images DIR] ls [-q|--quiet]

Options:
  -q, --quiet       Names only
      --images DIR  The image store [default: /var/lib/podinit/images;
                    without root, ~/.local/share/podinit/images]
  -h, --help        Print help
";

const RM_HELP: &str = "\
Remove images; blobs and layers no other image uses go too

Usage: podinit images [--images DIR] rm [-f|--force] NAME|DIGEST...

Arguments:
  NAME|DIGEST...  The images, by name or by digest

Options:
  -f, --force       Remove an image a running container uses too (refused otherwise)
      --images DIR  The image store [default: /var/lib/podinit/images;
                    without root, ~/.local/share/podinit/images]
  -h, --help        Print help
";

/// The help of `images` itself, or of the verb given before `--help`.
fn help_of(verb: Option<&str>) -> &'static str {
    match verb {
        Some("import") => IMPORT_HELP,
        Some("ls" | "list") => LS_HELP,
        Some("rm" | "remove") => RM_HELP,
        _ => HELP,
    }
}

/// What the words ask for.
#[derive(Debug, PartialEq)]
enum Action {
    /// `--help`, after a verb or not: the text to print.
    Help(&'static str),
    Import {
        path: PathBuf,
        name: Option<String>,
    },
    List {
        quiet: bool,
    },
    Remove {
        names: Vec<String>,
        force: bool,
    },
}

/// Parses the words after `images`; returns the store's root and the action.
fn parse(args: Vec<OsString>) -> Result<(PathBuf, Action), Error> {
    use lexopt::Arg::{Long, Short, Value};
    let mut p = lexopt::Parser::from_args(args);
    let mut root = crate::image::store::default_root();
    let mut cmd: Option<String> = None;
    let mut words: Vec<String> = vec![];
    let mut name = None;
    let mut quiet = false;
    let mut force = false;
    let bad = |what: String| Error::usage(Some("images"), what);
    let str = |v: OsString| {
        v.into_string()
            .map_err(|v| bad(format!("not valid UTF-8: {v:?}")))
    };
    while let Some(arg) = p.next().map_err(|e| bad(e.to_string()))? {
        match arg {
            Long("help") | Short('h') => return Ok((root, Action::Help(help_of(cmd.as_deref())))),
            Long("images") => root = p.value().map_err(|e| bad(e.to_string()))?.into(),
            Long("name") if cmd.as_deref() == Some("import") => {
                name = Some(str(p.value().map_err(|e| bad(e.to_string()))?)?)
            }
            Long("quiet") | Short('q') if cmd.as_deref() == Some("ls") => quiet = true,
            Long("force") | Short('f') if matches!(cmd.as_deref(), Some("rm" | "remove")) => {
                force = true
            }
            Value(v) if cmd.is_none() => cmd = Some(str(v)?),
            Value(v) => words.push(str(v)?),
            other => return Err(bad(format!("unknown option {}", super::show(&other)))),
        }
    }
    let one = |what: &str, words: Vec<String>| match <[String; 1]>::try_from(words) {
        Ok([w]) => Ok(w),
        Err(w) if w.is_empty() => Err(bad(format!("{what} is missing"))),
        Err(w) => Err(bad(format!("unexpected argument {:?}", w[1]))),
    };
    let action = match cmd.as_deref() {
        None => return Err(bad("no images command given".into())),
        Some("import") => Action::Import {
            path: one("FILE|DIR", words)?.into(),
            name,
        },
        Some("ls" | "list") if words.is_empty() => Action::List { quiet },
        Some("ls" | "list") => return Err(bad(format!("unexpected argument {:?}", words[0]))),
        Some("rm" | "remove") if words.is_empty() => {
            return Err(bad("NAME|DIGEST is missing".into()))
        }
        Some("rm" | "remove") => Action::Remove {
            names: words,
            force,
        },
        // `images pull` has options of its own and is read by `cli::images_pull`, which
        // main.rs hands it to before this parser sees it.
        Some(other) => return Err(bad(format!("unknown images command {other:?}"))),
    };
    Ok((root, action))
}

/// `podinit images …`; returns the exit status.
pub fn main(args: Vec<OsString>) -> i32 {
    // `pull` has a parser of its own (registry options); `--images` may come before it.
    let skip = match args.first().map(|a| a.to_string_lossy().into_owned()) {
        Some(a) if a == "--images" => 2,
        Some(a) if a.starts_with("--images=") => 1,
        _ => 0,
    };
    if args.get(skip).is_some_and(|a| a == "pull") {
        let mut rest = args;
        rest.remove(skip);
        return super::images_pull::main(rest);
    }
    let (root, action) = match parse(args) {
        Ok(p) => p,
        Err(e) => {
            crate::log::error(&e.0);
            return crate::run::EXIT_INVALID;
        }
    };
    if let Action::Help(text) = action {
        print!("{text}");
        return 0;
    }
    match run(&root, action) {
        Ok(()) => 0,
        Err(Failed::Said) => super::exit::EXIT_FAILED,
        Err(Failed::Error(e)) => super::exit::Failure::from(e).report(),
    }
}

/// Why a command failed: an error to say, or errors said already.
enum Failed {
    Error(crate::image::Error),
    Said,
}

impl From<crate::image::Error> for Failed {
    fn from(e: crate::image::Error) -> Self {
        Failed::Error(e)
    }
}

fn run(root: &std::path::Path, action: Action) -> Result<(), Failed> {
    let store = Store::open(root)?;
    match action {
        Action::Help(_) => {}
        Action::Import { path, name } => {
            for image in crate::image::import::import(&store, &path, name.as_deref())? {
                println!("{} {}", image.name, image.digest);
            }
        }
        Action::List { quiet } => print!("{}", table(&store.list()?, quiet)),
        Action::Remove { names, force } => {
            // As `crictl rmi`: every name is tried, each failure said in one line, and any
            // failure fails the command.
            let mut failed = false;
            for n in names {
                match store.remove(&n, force) {
                    Ok(()) => println!("{n}"),
                    Err(e) => {
                        super::exit::Failure::from(e).report();
                        failed = true;
                    }
                }
            }
            if failed {
                return Err(Failed::Said);
            }
        }
    }
    Ok(())
}

/// `ls`'s table, or its names alone.
fn table(images: &[crate::image::store::Listed], quiet: bool) -> String {
    if quiet {
        return images.iter().map(|i| format!("{}\n", i.name)).collect();
    }
    let w = images
        .iter()
        .map(|i| i.name.len())
        .max()
        .unwrap_or(0)
        .max(4);
    let mut out = format!("{:<w$}  {:<71}  SIZE\n", "NAME", "DIGEST");
    for i in images {
        out.push_str(&format!(
            "{:<w$}  {:<71}  {}\n",
            i.name,
            i.digest.to_string(),
            size(i.size)
        ));
    }
    out
}

/// Sizes as docker and crictl print them: decimal units, three significant figures.
fn size(n: u64) -> String {
    let units = ["B", "kB", "MB", "GB", "TB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1000.0 && u + 1 < units.len() {
        v /= 1000.0;
        u += 1;
    }
    if u == 0 {
        format!("{n}B")
    } else {
        let digits = if v >= 100.0 {
            0
        } else if v >= 10.0 {
            1
        } else {
            2
        };
        format!("{v:.digits$}{}", units[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(w: &[&str]) -> Result<(PathBuf, Action), Error> {
        parse(w.iter().map(OsString::from).collect())
    }

    /// What is wrong with `w`, from the line that also points at the help.
    fn refused(w: &[&str]) -> String {
        let line = words(w).unwrap_err().0;
        let what = line.strip_suffix(" (see `podinit images --help`)");
        what.unwrap_or_else(|| panic!("no pointer to the help: {line}"))
            .to_string()
    }

    #[test]
    fn parses_the_commands() {
        let (root, a) = words(&["--images", "/s", "import", "x.tar", "--name", "a:1"]).unwrap();
        assert_eq!(root, PathBuf::from("/s"));
        assert_eq!(
            a,
            Action::Import {
                path: "x.tar".into(),
                name: Some("a:1".into())
            }
        );
        let (root, a) = words(&["ls", "-q", "--images", "/t"]).unwrap();
        assert_eq!(
            (root, a),
            (PathBuf::from("/t"), Action::List { quiet: true })
        );
        assert_eq!(words(&["ls"]).unwrap().0, PathBuf::from(DEFAULT_ROOT));
        assert_eq!(
            words(&["rm", "a", "b"]).unwrap().1,
            Action::Remove {
                names: vec!["a".into(), "b".into()],
                force: false
            }
        );
        assert_eq!(
            words(&["rm", "--force", "a"]).unwrap().1,
            Action::Remove {
                names: vec!["a".into()],
                force: true
            }
        );
        assert_eq!(words(&["--help"]).unwrap().1, Action::Help(HELP));
        assert_eq!(words(&["-h", "ls"]).unwrap().1, Action::Help(HELP));
        for (verb, text) in [
            ("import", IMPORT_HELP),
            ("ls", LS_HELP),
            ("list", LS_HELP),
            ("rm", RM_HELP),
            ("remove", RM_HELP),
        ] {
            assert_eq!(words(&[verb, "--help"]).unwrap().1, Action::Help(text));
        }
        assert_eq!(
            words(&["--images", "/s", "rm", "-h"]).unwrap().1,
            Action::Help(RM_HELP)
        );
        assert_eq!(refused(&["import"]), "FILE|DIR is missing");
        assert_eq!(refused(&["rm"]), "NAME|DIGEST is missing");
        assert_eq!(refused(&["ls", "x"]), "unexpected argument \"x\"");
        assert_eq!(refused(&["ls", "--name", "x"]), "unknown option --name");
        assert_eq!(refused(&["frob"]), "unknown images command \"frob\"");
        assert_eq!(refused(&[]), "no images command given");
    }

    #[test]
    fn sizes_read_like_docker() {
        assert_eq!(size(999), "999B");
        assert_eq!(size(1_234), "1.23kB");
        assert_eq!(size(4_270_000), "4.27MB");
        assert_eq!(size(123_456_789), "123MB");
    }
}
