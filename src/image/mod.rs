//! OCI images: names, digests, the content-addressed store under `--images`, importing
//! archives and layouts, unpacking layers, and pulling from registries (docs/images.md).
//!
//! The store knows no pod; `admission` and the supervisor turn an [`store::Image`] into a
//! container's base exactly as a bundle is one (`bundle::Bundle`).

pub mod digest;
mod error;
pub mod import;
mod lock;
pub mod media;
mod names;
pub mod platform;
pub mod progress;
pub mod pull_records;
pub mod reference;
pub mod registry;
pub mod resolve;
pub mod store;
pub mod unpack;
pub mod zstd;

pub use error::{Error, Step};
