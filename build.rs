//! Link podinit's steady-state code together (link/hot-functions.txt, made by
//! scripts/hot-code): the supervisor gives back its code pages once started, and the kernel
//! maps code back by whole page-cache folios (fault-around, 64–128 KiB), so what runs at
//! rest costs a few folios when it sits together instead of one per function when it is
//! spread over the binary. Symbols the file names but the binary lacks (renamed since the
//! file was made) are skipped silently; the order is a layout hint, not a requirement.
fn main() {
    let order = concat!(env!("CARGO_MANIFEST_DIR"), "/link/hot-functions.txt");
    println!("cargo:rerun-if-changed={order}");
    println!("cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={order}");
    println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
    // The link map names every function of the stripped binary with its address, for
    // scripts/hot-code (symbol names carry a hash of the build's settings, so they must
    // come from the very build that is traced).
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    println!("cargo:rustc-link-arg-bins=-Wl,-Map={out}/podinit.map");
    println!("cargo:rustc-link-arg-bins=-Wl,--no-demangle");
}
