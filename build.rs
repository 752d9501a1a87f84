//! How the podinit binary is linked (lld, Rust's default linker on x86_64 Linux since 1.90).
fn main() {
    let dir = env!("CARGO_MANIFEST_DIR");
    // The steady-state code together (link/hot-functions.txt, made by scripts/hot-code/run):
    // the supervisor and the containerd shim give back their code pages once started, and
    // the kernel maps code back by whole page-cache folios (fault-around, 64–128 KiB), so
    // what runs at rest costs a few folios when it sits together instead of one per
    // function when it is spread over the binary. Names the binary lacks (renamed since the file was made) are skipped: the
    // order is a layout hint, not a requirement.
    let order = format!("{dir}/link/hot-functions.txt");
    println!("cargo:rerun-if-changed={order}");
    println!("cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={order}");
    println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
    // The link map names every function of the stripped binary with its address, for
    // scripts/hot-code (symbol names carry a hash of the build's settings, so they must
    // come from the very build that is traced).
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    for bin in ["podinit", "containerd-shim-podinit-v1"] {
        println!("cargo:rustc-link-arg-bin={bin}=-Wl,-Map={out}/{bin}.map");
    }
    println!("cargo:rustc-link-arg-bins=-Wl,--no-demangle");
    // Relative relocations packed (DT_RELR, glibc ≥ 2.36 also in static PIE): 140 KB less
    // when built position-independent (.cargo/config.toml builds fixed-address, with none).
    println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    // Identical functions folded into one (generic code instantiated for types of the
    // same layout, mostly): 64 KB less. Rust promises no distinct function addresses.
    println!("cargo:rustc-link-arg-bins=-Wl,--icf=all");
    // Each segment at an address congruent to its file offset modulo 2 MiB, not only a
    // page: the page cache holds a file in folios aligned to their size in the file (as it
    // was written or read ahead), and a fault maps back the folios around it, aligned in
    // memory. Out of step, the one function that runs at rest maps two folios back instead
    // of one. The file is not padded: only the addresses move.
    println!("cargo:rustc-link-arg-bin=podinit=-Wl,-z,max-page-size=0x200000");
    // Without unwinding (panic = "abort" in Cargo.toml's release profile) the unwind
    // tables are dead weight: link/no-unwind-tables.ld drops them. Cargo tells a build
    // script the profile's family, not its panic strategy.
    if std::env::var("PROFILE").as_deref() == Ok("release") {
        let script = format!("{dir}/link/no-unwind-tables.ld");
        println!("cargo:rerun-if-changed={script}");
        println!("cargo:rustc-link-arg-bins=-Wl,-T,{script}");
    }
}
