//! Small helpers shared across modules.
