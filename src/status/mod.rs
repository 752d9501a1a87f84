//! What podinit reports: the Pod status (rendered from `pod`'s state), `status.json`, and
//! the pod's events.

pub mod events;
pub mod events_table;
pub mod notify;
pub mod render;
pub mod table;
pub mod writer;
