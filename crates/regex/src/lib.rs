//! `regex` as podinit's dependency graph sees it, backed by `regex-lite` (the same
//! project's small engine, the same API). Its one user is oci-spec, which checks
//! `process.execCPUAffinity` against `^(\d+(-\d+)?)(,\d+(-\d+)?)*$`; the full engine and
//! its Unicode tables were 0.6 MB of podinit's binary for that one pattern. regex-lite's
//! `\d` is ASCII, which is what a CPU list is made of.
pub use regex_lite::*;
