//! The messages between a container's creator and the container's process during its
//! set-up (`container` and `init::standalone`), one per packet of their SEQPACKET pair,
//! encoded and decoded here only. Each is one letter, then its payload.

/// One message of the set-up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sync {
    /// Creator → process: go on, with the OCI state its own hooks read at createContainer
    /// (`creating`) and at startContainer (`created`).
    Go { creating: String, created: String },
    /// Process → creator: run the prestart and createRuntime hooks now.
    Hooks,
    /// Creator → process: its hooks ran, continue.
    Continue,
    /// Process → creator: set up, waiting at the exec fifo.
    Ready,
    /// Process → creator: the set-up failed, and why.
    Failed(String),
}

impl Sync {
    pub fn encode(&self) -> Vec<u8> {
        match self {
            Sync::Go { creating, created } => {
                [b"G", creating.as_bytes(), b"\0", created.as_bytes()].concat()
            }
            Sync::Hooks => b"H".to_vec(),
            Sync::Continue => b"C".to_vec(),
            Sync::Ready => b"R".to_vec(),
            Sync::Failed(why) => [b"E", why.as_bytes()].concat(),
        }
    }

    /// None for an empty packet (the other end has gone) or one that is no message.
    pub fn decode(msg: &[u8]) -> Option<Sync> {
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        let (&tag, body) = msg.split_first()?;
        Some(match tag {
            b'G' => {
                let mut parts = body.splitn(2, |&b| b == 0);
                Sync::Go {
                    creating: text(parts.next().unwrap_or_default()),
                    created: text(parts.next().unwrap_or_default()),
                }
            }
            b'H' => Sync::Hooks,
            b'C' => Sync::Continue,
            b'R' => Sync::Ready,
            b'E' => Sync::Failed(text(body)),
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_decodes_as_it_was_encoded() {
        let all = [
            Sync::Go {
                creating: r#"{"status":"creating"}"#.into(),
                created: r#"{"status":"created"}"#.into(),
            },
            Sync::Hooks,
            Sync::Continue,
            Sync::Ready,
            Sync::Failed("mount /proc: EPERM".into()),
        ];
        for m in all {
            assert_eq!(Sync::decode(&m.encode()), Some(m.clone()), "{m:?}");
        }
        assert_eq!(Sync::decode(b""), None);
        assert_eq!(Sync::decode(b"X"), None);
        assert_eq!(Sync::Ready.encode(), b"R");
    }
}
