//! Decompression bombs for the image tests: an OCI image layout whose one layer is a tar of
//! a single zero-filled file, compressed far below its size. The gzip stream is a chain of
//! members (one per MiB of zeros, each compressed once and repeated), as `MultiGzDecoder`
//! and gzip(1) read them, so that a 2 GiB bomb is made in a moment; zstd is one frame made
//! by zstd(1).
#![allow(dead_code)]

use podinit::image::digest::Digest;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const MIB: u64 = 1 << 20;
const OCI: &str = "application/vnd.oci.image.";

#[derive(Clone, Copy, Debug)]
pub enum Codec {
    Gzip,
    Zstd,
}

/// What was made.
pub struct Bomb {
    /// The OCI image layout directory.
    pub layout: PathBuf,
    /// The layer blob's digest (`sha256:…`), which errors name.
    pub layer: String,
    /// The layer blob's size.
    pub compressed: u64,
}

/// How the layout lies, if it does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Lie {
    /// Everything true: the diffID is the tar's.
    None,
    /// The diffID is not the tar's: an attacker need not make it right to fill a disk.
    DiffId,
    /// The blob's last byte changed after its digest was taken (the diffID is not the
    /// tar's either: the digest is what must stop it).
    Digest,
}

/// The tar: a header for `zeros` bytes of file `zeros`, the bytes, the end blocks.
fn tar_header(zeros: u64) -> Vec<u8> {
    let mut h = tar::Header::new_ustar();
    h.set_path("zeros").unwrap();
    h.set_size(zeros);
    h.set_mode(0o644);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mtime(1700000000);
    h.set_entry_type(tar::EntryType::Regular);
    h.set_cksum();
    h.as_bytes().to_vec()
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(vec![], flate2::Compression::best());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn gzip_bomb(zeros: u64) -> Vec<u8> {
    assert_eq!(zeros % MIB, 0, "whole MiB only");
    let mut out = gzip(&tar_header(zeros));
    let mib = gzip(&vec![0; MIB as usize]);
    for _ in 0..zeros / MIB {
        out.extend_from_slice(&mib);
    }
    out.extend_from_slice(&gzip(&[0u8; 1024]));
    out
}

fn zstd_bomb(zeros: u64) -> Vec<u8> {
    let mut child = Command::new("zstd")
        .args(["-q", "-c"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("zstd(1) is needed for the zstd bomb (Debian's zstd)");
    let mut stdin = child.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        stdin.write_all(&tar_header(zeros)).unwrap();
        let mib = vec![0; MIB as usize];
        for _ in 0..zeros / MIB {
            stdin.write_all(&mib).unwrap();
        }
        stdin.write_all(&[0u8; 1024]).unwrap();
    });
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    assert!(out.status.success(), "zstd failed");
    out.stdout
}

/// The diffID of the tar `tar_header(zeros)` starts, hashed as it would be streamed.
fn diff_id(zeros: u64) -> Digest {
    use sha2::Digest as _;
    let mut h = sha2::Sha256::new();
    h.update(tar_header(zeros));
    let mib = vec![0; MIB as usize];
    for _ in 0..zeros / MIB {
        h.update(&mib);
    }
    h.update([0u8; 1024]);
    Digest::parse(&format!("sha256:{:x}", h.finalize())).unwrap()
}

fn json(v: &serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap()
}

fn put(layout: &Path, data: &[u8]) -> String {
    let d = Digest::of(data);
    fs::write(layout.join("blobs/sha256").join(&d.hex), data).unwrap();
    d.to_string()
}

fn arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        a => a,
    }
}

/// An OCI image layout at `dir` naming `name` (`podinit.test/bomb:1`), whose one layer
/// is `zeros` bytes of zeros (whole MiB) in `codec`.
pub fn layout(dir: &Path, name: &str, zeros: u64, codec: Codec, lie: Lie) -> Bomb {
    fs::create_dir_all(dir.join("blobs/sha256")).unwrap();
    fs::write(dir.join("oci-layout"), br#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
    let (blob, media) = match codec {
        Codec::Gzip => (gzip_bomb(zeros), "layer.v1.tar+gzip"),
        Codec::Zstd => (zstd_bomb(zeros), "layer.v1.tar+zstd"),
    };
    // Hashing a bomb takes long in a debug build: only a true layout has its true diffID.
    let diff = match lie {
        Lie::None => diff_id(zeros),
        _ => Digest::of(b"not the layer's content"),
    };
    let layer = put(dir, &blob);
    if lie == Lie::Digest {
        let mut bad = blob.clone();
        *bad.last_mut().unwrap() ^= 0xff;
        let hex = layer.strip_prefix("sha256:").unwrap();
        fs::write(dir.join("blobs/sha256").join(hex), bad).unwrap();
    }
    let config = json(&serde_json::json!({
        "architecture": arch(),
        "os": "linux",
        "config": {"Cmd": ["sh"]},
        "rootfs": {"type": "layers", "diff_ids": [diff.to_string()]},
    }));
    let manifest = json(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": format!("{OCI}manifest.v1+json"),
        "config": {"mediaType": format!("{OCI}config.v1+json"),
                   "digest": put(dir, &config), "size": config.len()},
        "layers": [{"mediaType": format!("{OCI}{media}"), "digest": layer, "size": blob.len()}],
    }));
    let index = json(&serde_json::json!({
        "schemaVersion": 2,
        "manifests": [{"mediaType": format!("{OCI}manifest.v1+json"),
                       "digest": put(dir, &manifest), "size": manifest.len(),
                       "annotations": {"org.opencontainers.image.ref.name": name}}],
    }));
    fs::write(dir.join("index.json"), index).unwrap();
    Bomb {
        layout: dir.to_path_buf(),
        layer,
        compressed: blob.len() as u64,
    }
}

/// The layout as an oci-archive (what `Registry::push` takes).
pub fn archive(bomb: &Bomb, out: &Path) {
    let o = Command::new("tar")
        .arg("-C")
        .arg(&bomb.layout)
        .args(["-cf"])
        .arg(out)
        .arg(".")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "tar: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}
