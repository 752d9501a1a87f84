//! Unpacking one layer blob into a directory: decompression and the diffID check run in a
//! thread of their own, feeding the tar entries written in the caller's, as `tar -xzf`
//! runs gzip in a process of its own. The decompressing thread stops a layer at its cap
//! (`limits`) before the bytes past it reach the disk.

mod apply;
mod limits;

pub use apply::clean;
pub use limits::Limits;

use super::digest::{Digest, Verifier};
use super::error::{Error, Result};
use super::media::Compression;
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;
use std::sync::mpsc::{sync_channel, Receiver};

/// Size of the chunks handed from the decompressing thread to the writing one.
const CHUNK: usize = 256 * 1024;
/// Chunks in flight: enough to keep both threads busy, little memory.
const IN_FLIGHT: usize = 8;

/// Unpacks the layer in `blob` (compressed as `compression`) into the empty directory
/// `dest`, checking that its uncompressed content is `diff_id` and no larger than
/// `limits` allow. On error `dest` holds a part of the layer: the caller removes it.
pub fn unpack(
    blob: &Path,
    compression: Compression,
    diff_id: &Digest,
    dest: &Path,
    limits: &Limits,
) -> Result<()> {
    let file =
        File::open(blob).map_err(|e| Error::io(format_args!("opening {}", blob.display()), e))?;
    let compressed = file
        .metadata()
        .map_err(|e| Error::io(format_args!("reading {}", blob.display()), e))?
        .len();
    let cap = limits.cap(compressed);
    let (tx, rx) = sync_channel::<io::Result<Vec<u8>>>(IN_FLIGHT);
    let diff_id = diff_id.clone();
    let producer = std::thread::Builder::new()
        .name("unpack".into())
        .spawn(move || -> Option<limits::Cap> {
            let input = BufReader::with_capacity(CHUNK, file);
            let plain: Box<dyn Read> = match compression {
                Compression::None => Box::new(input),
                Compression::Gzip => {
                    Box::new(Named("gzip", flate2::bufread::MultiGzDecoder::new(input)))
                }
                Compression::Zstd => match crate::image::zstd::Frames::new(input) {
                    Ok(d) => Box::new(Named("zstd", d)),
                    Err(e) => {
                        let _ = tx.send(Err(io::Error::new(e.kind(), format!("zstd: {e}"))));
                        return None;
                    }
                },
            };
            let mut verified = Verifier::new(plain, &diff_id, None);
            loop {
                let mut buf = vec![0; CHUNK];
                match read_full(&mut verified, &mut buf) {
                    Ok(0) => return None,
                    Ok(_) if cap.is_some_and(|c| verified.bytes_read() > c.bytes) => {
                        // The writer is told only that the stream stopped; the cap's own
                        // error is this thread's result.
                        let _ = tx.send(Err(io::Error::other("the layer is over its cap")));
                        return cap;
                    }
                    Ok(n) => {
                        buf.truncate(n);
                        if tx.send(Ok(buf)).is_err() {
                            return None;
                        }
                    }
                    Err(e) => {
                        let e = match e.to_string() {
                            m if m.starts_with("digest mismatch") => io::Error::new(
                                e.kind(),
                                format!("the uncompressed layer is not its diffID: {m}"),
                            ),
                            _ => e,
                        };
                        let _ = tx.send(Err(e));
                        return None;
                    }
                }
            }
        })
        .map_err(|e| Error::io("starting the unpacking thread", e))?;
    let mut archive = tar::Archive::new(Chunks {
        rx,
        cur: vec![],
        pos: 0,
        failed: None,
    });
    let applied = apply::Applier::new(dest).apply(&mut archive);
    let mut rest = archive.into_inner();
    // The rest past the end-of-archive blocks is read to be hashed. A damaged stream
    // often shows first as a tar entry that makes no sense, so after an entry's error the
    // rest is read too, and the stream's own error (corrupt gzip, wrong diffID) wins.
    let drained = io::copy(&mut rest, &mut io::sink())
        .map(drop)
        .map_err(Error::Os);
    let result = match (applied, drained) {
        (Ok(()), d) => d,
        (Err(e), Ok(())) => Err(e),
        (Err(e), Err(stream)) => Err(rest.failed.take().map_or(e, |_| stream)),
    };
    // Dropping the receiver stops a producer that is still decompressing.
    drop(rest);
    match producer.join() {
        Ok(Some(over)) => Err(over.exceeded()),
        _ => result,
    }
}

/// A decompressor whose errors say which it is.
struct Named<R>(&'static str, R);

impl<R: Read> Read for Named<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.1.read(buf).map_err(|e| {
            let m = format!("{}: {e}", self.0).replace('\n', " ");
            io::Error::new(e.kind(), m)
        })
    }
}

/// Reads until `buf` is full or the input ends.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// The writing side: a reader over the chunks the decompressing thread sends. An error
/// from that thread is kept and returned again on every later read.
struct Chunks {
    rx: Receiver<io::Result<Vec<u8>>>,
    cur: Vec<u8>,
    pos: usize,
    failed: Option<(io::ErrorKind, String)>,
}

impl Read for Chunks {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some((kind, msg)) = &self.failed {
            return Err(io::Error::new(*kind, msg.clone()));
        }
        while self.pos == self.cur.len() {
            match self.rx.recv() {
                Ok(Ok(chunk)) => {
                    self.cur = chunk;
                    self.pos = 0;
                }
                Ok(Err(e)) => {
                    self.failed = Some((e.kind(), e.to_string()));
                    return Err(e);
                }
                Err(_) => return Ok(0),
            }
        }
        let n = buf.len().min(self.cur.len() - self.pos);
        buf[..n].copy_from_slice(&self.cur[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}
