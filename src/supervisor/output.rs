//! Container output: pipes into the log files and out to `follow` streams, and the end of
//! those streams once a run has nothing more to say.

use super::Supervisor;
use crate::api::server::Stream;

impl Supervisor<'_> {
    /// Whether container `i`'s current run has nothing more to say: its process was reaped
    /// and both its pipes are closed. Its `follow` streams end then, as kubelet's do when
    /// the container has exited and its log is read to the end.
    pub(super) fn output_done(&self, i: usize) -> bool {
        self.containers[i].ctr.run.is_none() && !self.pipes.iter().any(|p| p.ctr == i)
    }

    pub(super) fn end_followers_when_done(&mut self, i: usize) {
        if !self.output_done(i) {
            return;
        }
        let Some(srv) = &mut self.server else { return };
        let name = &self.containers[i].ctr.name;
        for ts in [false, true] {
            srv.end_streams(&Stream::Log(name.clone(), ts));
        }
        srv.end_streams(&Stream::Attach(name.clone()));
    }

    /// Copy ready container output into the logs (and to `follow` watchers).
    pub(super) fn read_pipes(&mut self, ready: &[usize]) {
        let mut closed = Vec::new();
        let mut buf = vec![0u8; 64 << 10];
        // Each piece of output, without and with line times (`follow&timestamps`).
        let mut followed: Vec<(usize, Vec<u8>, Vec<u8>)> = Vec::new();
        // The raw bytes, for attach sessions: what a terminal shows, `\r` and all.
        let mut attached: Vec<(usize, Vec<u8>)> = Vec::new();
        let attach_sessions = self
            .server
            .as_ref()
            .is_some_and(|s| s.has_attach_sessions());
        for &k in ready {
            let p = &mut self.pipes[k];
            // Bounded per wake-up so that one chatty container cannot starve the loop.
            for _ in 0..16 {
                let n = match nix::unistd::read(&p.fd, &mut buf) {
                    Ok(n) => n,
                    Err(nix::errno::Errno::EAGAIN) => break,
                    Err(nix::errno::Errno::EINTR) => continue,
                    Err(_) => 0,
                };
                let (log, stream, ctr) = (p.log.clone(), p.stream, p.ctr);
                let ts = crate::util::now_unix_nanos();
                let stamp = crate::util::rfc3339_nanos(ts);
                let (mut out, mut out_ts) = (Vec::new(), Vec::new());
                let mid_line = &mut p.mid_line;
                let mut emit = |partial: bool, line: &[u8]| {
                    let line = if partial {
                        line
                    } else {
                        crate::pod::attach::log_line(line)
                    };
                    log.borrow_mut().record(ts, stream, partial, line);
                    if !*mid_line {
                        out_ts.extend_from_slice(stamp.as_bytes());
                        out_ts.push(b' ');
                    }
                    *mid_line = partial;
                    for o in [&mut out, &mut out_ts] {
                        o.extend_from_slice(line);
                        if !partial {
                            o.push(b'\n');
                        }
                    }
                };
                if n == 0 {
                    p.split.finish(&mut emit);
                    closed.push(k);
                } else {
                    p.split.feed(&buf[..n], &mut emit);
                    if attach_sessions {
                        attached.push((ctr, buf[..n].to_vec()));
                    }
                }
                if !out.is_empty() {
                    followed.push((ctr, out, out_ts));
                }
                if n == 0 {
                    break;
                }
            }
        }
        for k in closed.iter().rev() {
            self.pipes.swap_remove(*k);
        }
        if let Some(srv) = &mut self.server {
            for (ctr, bytes) in attached {
                let name = &self.containers[ctr].ctr.name;
                srv.broadcast(&Stream::Attach(name.clone()), &bytes);
            }
            for (ctr, text, text_ts) in followed {
                let name = &self.containers[ctr].ctr.name;
                srv.broadcast(&Stream::Log(name.clone(), false), &text);
                srv.broadcast(&Stream::Log(name.clone(), true), &text_ts);
            }
        }
        if !closed.is_empty() {
            for c in 0..self.containers.len() {
                self.end_followers_when_done(c);
            }
        }
    }
}
