//! The store's file locks. Writers of content hold `lock` shared while they have
//! anything in `tmp/` or are between putting blobs and naming them; removing content and
//! cleaning `tmp/` take it exclusive. `names.lock` serialises changes to the names.

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use std::fs::{File, OpenOptions};
use std::path::Path;

use super::error::{Error, Result};

/// A held lock; dropping it unlocks.
pub struct Lock {
    _held: Flock<File>,
}

fn open(path: &Path) -> Result<File> {
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| Error::io(format_args!("opening the lock {}", path.display()), e))
}

/// Waits for the lock at `path`.
pub fn take(path: &Path, exclusive: bool) -> Result<Lock> {
    let arg = if exclusive {
        FlockArg::LockExclusive
    } else {
        FlockArg::LockShared
    };
    loop {
        match Flock::lock(open(path)?, arg) {
            Ok(held) => return Ok(Lock { _held: held }),
            Err((_, Errno::EINTR)) => continue,
            Err((_, errno)) => {
                return Err(Error::sys(
                    format_args!("locking {}", path.display()),
                    errno,
                ))
            }
        }
    }
}

/// The exclusive lock if nobody holds it now.
pub fn try_exclusive(path: &Path) -> Result<Option<Lock>> {
    match Flock::lock(open(path)?, FlockArg::LockExclusiveNonblock) {
        Ok(held) => Ok(Some(Lock { _held: held })),
        Err((_, Errno::EWOULDBLOCK)) => Ok(None),
        Err((_, errno)) => Err(Error::sys(
            format_args!("locking {}", path.display()),
            errno,
        )),
    }
}

/// A shared lock on a directory (a layer a running container uses), or, exclusive and
/// without waiting, the proof that nobody holds one.
pub fn dir(path: &Path, exclusive: bool) -> Result<Option<Lock>> {
    let f =
        File::open(path).map_err(|e| Error::io(format_args!("opening {}", path.display()), e))?;
    let arg = if exclusive {
        FlockArg::LockExclusiveNonblock
    } else {
        FlockArg::LockShared
    };
    match Flock::lock(f, arg) {
        Ok(held) => Ok(Some(Lock { _held: held })),
        Err((_, Errno::EWOULDBLOCK)) => Ok(None),
        Err((_, errno)) => Err(Error::sys(
            format_args!("locking {}", path.display()),
            errno,
        )),
    }
}
