//! The status socket's request parser on any bytes, as a client could send them (several
//! pipelined requests in one buffer), then the router. Neither may panic; the parser must
//! consume at least one byte per request and never more than it was given, and it must
//! give the same answer for a buffer whatever comes after a complete request.

#![no_main]

use libfuzzer_sys::fuzz_target;
use podinit::api::http::{parse, MAX_BODY, MAX_HEAD};

fuzz_target!(|data: &[u8]| {
    let mut buf = data;
    loop {
        match parse(buf) {
            Ok(Some((req, n))) => {
                assert!(n > 0 && n <= buf.len(), "used {n} of {} bytes", buf.len());
                assert!(req.body.len() <= MAX_BODY);
                // The same request parses from exactly its own bytes.
                let again = parse(&buf[..n]);
                assert_eq!(again, Ok(Some((req.clone(), n))));
                let _ = podinit::api::routes::route(&req);
                buf = &buf[n..];
            }
            Ok(None) => {
                // Incomplete: only while the head is within its limit.
                assert!(buf.len() <= MAX_HEAD + MAX_BODY + 1);
                break;
            }
            Err(e) => {
                let _ = (e.code(), e.message());
                break;
            }
        }
    }
});
