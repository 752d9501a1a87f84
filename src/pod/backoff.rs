#[derive(Clone, Debug, Default)]
pub struct Backoff;
