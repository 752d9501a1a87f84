//! One file of a volume of files (`configMap`, `secret`, `downwardAPI`, `projected`), as
//! admission computes it (`manifest::files`) and the sandbox writes it
//! (`sandbox::volumes`): kubelet's `FileProjection`.

/// One file: its path inside the volume, content and mode.
#[derive(Debug, PartialEq, Eq)]
pub struct File {
    pub path: String,
    pub data: Vec<u8>,
    pub mode: u32,
}
