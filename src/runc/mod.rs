//! runc's command line over podinit's runtime (docs/architecture.md §5): `podinit runc …`
//! or a link whose name ends in `runc`.

pub mod features;
pub mod spec;
