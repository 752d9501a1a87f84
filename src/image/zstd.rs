//! A zstd stream of any number of frames. RFC 8878 §3 lets a stream hold several frames,
//! and skippable frames beside them: `zstd` writes one per input it concatenates, and
//! zstd:chunked layers (podman, buildah) are many frames with their index in a skippable
//! one. ruzstd's `StreamingDecoder` reads one frame, which would cut such a layer short.

use ruzstd::decoding::errors::{FrameDecoderError, ReadFrameHeaderError};
use ruzstd::decoding::{BlockDecodingStrategy, FrameDecoder};
use std::io::{self, BufRead, Read};

/// The decoded bytes of every data frame of `src`, in order; skippable frames are skipped.
pub struct Frames<R: BufRead> {
    src: R,
    dec: FrameDecoder,
}

impl<R: BufRead> Frames<R> {
    /// A reader of `src`, which must open with a frame. Errors do not say `zstd`: the
    /// caller names the stream.
    pub fn new(src: R) -> io::Result<Self> {
        let mut f = Frames {
            src,
            dec: FrameDecoder::new(),
        };
        if !f.next_frame()? {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the stream holds no frame",
            ));
        }
        Ok(f)
    }

    /// Starts the next data frame, past any skippable ones: false at the end of the input.
    fn next_frame(&mut self) -> io::Result<bool> {
        loop {
            if self.src.fill_buf()?.is_empty() {
                return Ok(false);
            }
            match self.dec.reset(&mut self.src) {
                Ok(()) => return Ok(true),
                Err(FrameDecoderError::ReadFrameHeaderError(ReadFrameHeaderError::SkipFrame {
                    length,
                    ..
                })) => {
                    let skipped = io::copy(
                        &mut (&mut self.src).take(u64::from(length)),
                        &mut io::sink(),
                    )?;
                    if skipped != u64::from(length) {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "the stream ends inside a skippable frame",
                        ));
                    }
                }
                Err(e) => return Err(invalid(e)),
            }
        }
    }
}

fn invalid(e: FrameDecoderError) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string().replace('\n', " "))
}

impl<R: BufRead> Read for Frames<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            if self.dec.is_finished() && self.dec.can_collect() == 0 {
                if !self.next_frame()? {
                    return Ok(0);
                }
                continue;
            }
            while self.dec.can_collect() == 0 && !self.dec.is_finished() {
                self.dec
                    .decode_blocks(&mut self.src, BlockDecodingStrategy::UptoBlocks(1))
                    .map_err(invalid)?;
            }
            let n = self.dec.read(buf)?;
            // A frame may decode to nothing: go on to the next one rather than end here.
            if n > 0 {
                return Ok(n);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `data` as one zstd frame (ruzstd's encoder, no checksum).
    fn frame(data: &[u8]) -> Vec<u8> {
        ruzstd::encoding::compress_to_vec(data, ruzstd::encoding::CompressionLevel::Fastest)
    }

    fn skippable(payload: &[u8]) -> Vec<u8> {
        let mut v = 0x184D_2A53u32.to_le_bytes().to_vec();
        v.extend((payload.len() as u32).to_le_bytes());
        v.extend(payload);
        v
    }

    fn decode(stream: &[u8]) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        Frames::new(io::BufReader::with_capacity(7, stream))?.read_to_end(&mut out)?;
        Ok(out)
    }

    #[test]
    fn every_frame_is_read_and_skippable_frames_are_skipped() {
        let big: Vec<u8> = (0..200_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        let mut s = frame(b"first ");
        s.extend(skippable(b"an index"));
        s.extend(frame(&big));
        s.extend(frame(b""));
        s.extend(frame(b" last"));
        s.extend(skippable(b"the chunked manifest"));
        let mut want = b"first ".to_vec();
        want.extend(&big);
        want.extend(b" last");
        assert_eq!(decode(&s).unwrap(), want);
        assert_eq!(decode(&frame(b"one")).unwrap(), b"one");
    }

    #[test]
    fn a_stream_that_is_not_zstd_or_is_cut_short_is_an_error() {
        assert!(decode(b"").is_err());
        assert!(decode(b"plain text").is_err());
        let mut s = frame(b"whole");
        s.extend(skippable(b"index"));
        s.truncate(s.len() - 2);
        assert!(decode(&s).is_err());
        let cut = frame(&[7u8; 100_000]);
        assert!(decode(&cut[..cut.len() / 2]).is_err());
    }
}
