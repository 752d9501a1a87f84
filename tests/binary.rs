//! The binary is one static executable (no program interpreter, no shared libraries).

use std::path::PathBuf;

fn u16_at(b: &[u8], o: usize) -> usize {
    u16::from_le_bytes([b[o], b[o + 1]]) as usize
}
fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], o: usize) -> usize {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap()) as usize
}

#[test]
fn podinit_is_static() {
    let path = PathBuf::from(env!("CARGO_BIN_EXE_podinit"));
    let b = std::fs::read(&path).unwrap();
    assert_eq!(&b[..4], b"\x7fELF");
    assert_eq!(b[4], 2, "64-bit ELF");
    let (phoff, phentsize, phnum) = (u64_at(&b, 0x20), u16_at(&b, 0x36), u16_at(&b, 0x38));
    const PT_INTERP: u32 = 3;
    for i in 0..phnum {
        let ty = u32_at(&b, phoff + i * phentsize);
        assert_ne!(
            ty,
            PT_INTERP,
            "{} has a program interpreter: not static",
            path.display()
        );
    }
    eprintln!("{}: {} bytes", path.display(), b.len());
}

#[test]
fn shell_completions_cover_the_commands() {
    for shell in ["bash", "zsh", "fish"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_podinit"))
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(out.status.success(), "{shell}");
        let text = String::from_utf8_lossy(&out.stdout);
        for cmd in ["run", "status", "exec", "logs", "stop"] {
            assert!(text.contains(cmd), "{shell} completion lacks {cmd}");
        }
    }
}
