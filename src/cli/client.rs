//! The client commands (`status`, `events`, `logs`, `exec`, `debug`, `condition`, `stop`,
//! `attach`): one request each over the pod's status socket; `status`, `events` and `logs`
//! of a pod that has ended read its kept files instead.

use super::exit::Failure;
use super::pods::{self, Target};
use crate::api::client::{self, Response};
use crate::error::Kind;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(10);

/// How a client command names its pod: `POD`, `--socket`, `--state-root`.
#[derive(Clone)]
pub struct Pick {
    pub pod: Option<String>,
    pub socket: Option<PathBuf>,
    pub root: PathBuf,
}

impl Pick {
    fn target(self) -> Result<Target, Failure> {
        pods::target(self.pod.as_deref(), self.socket, &self.root)
    }

    /// The socket of a running pod: `what` cannot be done to one that has ended.
    fn live(self, what: &str) -> Result<PathBuf, Failure> {
        match self.target()? {
            Target::Live(s) => Ok(s),
            Target::Ended(p) => Err(Failure::failed(
                Kind::FailedPrecondition,
                format!(
                    "pod {} has ended: {what} needs it running (status, events and logs read what it left)",
                    p.key()
                ),
            )),
        }
    }
}

fn now_secs() -> i64 {
    (crate::util::now_unix_nanos() / 1_000_000_000) as i64
}

/// Run `f`, print its error as one line; the exit status.
fn run(f: impl FnOnce() -> Result<i32, Failure>) -> i32 {
    match f() {
        Ok(code) => code,
        Err(e) => e.report(),
    }
}

/// A success, or the server's refusal.
fn ok(r: Response) -> Result<Response, Failure> {
    if (200..300).contains(&r.code) {
        Ok(r)
    } else {
        Err(refused(&r))
    }
}

/// The server's refusal, with the kind its code says.
fn refused(r: &Response) -> Failure {
    Failure::Refused {
        kind: crate::api::Error::kind_of_code(r.code),
        message: r.error_message(),
    }
}

fn get(s: &std::path::Path, path: &str) -> Result<Response, Failure> {
    ok(client::request(s, "GET", path, None, TIMEOUT).map_err(|e| e.to_string())?)
}

pub fn status(p: Pick, output: &str) -> i32 {
    run(|| {
        let pod: serde_json::Value = match p.target()? {
            Target::Live(s) => {
                serde_json::from_slice(&get(&s, "/v1/pod")?.body).map_err(|e| e.to_string())?
            }
            Target::Ended(d) => d.pod()?,
        };
        let now = now_secs();
        let text = match output {
            "json" => serde_json::to_string_pretty(&pod).unwrap_or_default() + "\n",
            "yaml" => serde_yaml_ng::to_string(&pod).unwrap_or_default(),
            wide => crate::status::table::render(&pod, wide == "wide", now),
        };
        print!("{text}");
        Ok(0)
    })
}

pub fn events(p: Pick, watch: bool) -> i32 {
    use crate::status::events_table::render;
    let kept =
        |d: &pods::PodDir| print!("{}", render(&pods::kept_events(&d.dir), true, now_secs()));
    run(|| {
        let s = match p.clone().target()? {
            Target::Live(s) => s,
            Target::Ended(d) => {
                kept(&d);
                return Ok(0);
            }
        };
        if watch {
            // As `kubectl events --watch`: the header with the first event, then a line each.
            let mut header = true;
            let mut buf = Vec::new();
            let r = client::stream(&s, "/v1/events?watch=true", &mut |d| {
                buf.extend_from_slice(d);
                while let Some(n) = buf.iter().position(|&b| b == b'\n') {
                    if let Ok(e) = serde_json::from_slice::<serde_json::Value>(&buf[..n]) {
                        print!("{}", render(&[e], header, now_secs()));
                        let _ = std::io::stdout().flush();
                        header = false;
                    }
                    buf.drain(..=n);
                }
            });
            // The pod ended between the pick and the watch (its socket refused us, or closed
            // before a line): what it kept is the whole story, as for an ended pod.
            if header {
                if let Ok(Target::Ended(d)) = p.target() {
                    kept(&d);
                    return Ok(0);
                }
            }
            ok(r.map_err(|e| e.to_string())?)?;
            return Ok(0);
        }
        let r = get(&s, "/v1/events")?;
        let v: serde_json::Value = serde_json::from_slice(&r.body).map_err(|e| e.to_string())?;
        let items = v["items"].as_array().cloned().unwrap_or_default();
        print!("{}", render(&items, true, now_secs()));
        Ok(0)
    })
}

pub fn logs(p: Pick, c: &str, follow: bool, previous: bool, tail: Option<u64>, ts: bool) -> i32 {
    run(|| {
        let s = match p.target()? {
            Target::Live(s) => s,
            // Ended: nothing more will come, `--follow` or not.
            Target::Ended(d) => {
                let path = pods::kept_log(&d.dir, &d.pod()?, c, previous)?;
                let text = crate::logs::render(&path, tail.map(|n| n as usize), ts);
                let _ = std::io::stdout().write_all(&text);
                return Ok(0);
            }
        };
        let mut q =
            format!("/v1/containers/{c}/log?follow={follow}&previous={previous}&timestamps={ts}");
        if let Some(n) = tail {
            q.push_str(&format!("&tailLines={n}"));
        }
        let mut out = std::io::stdout();
        let r = client::stream(&s, &q, &mut |d| {
            let _ = out.write_all(d);
            let _ = out.flush();
        })
        .map_err(|e| e.to_string())?;
        let r = ok(r)?;
        let _ = out.write_all(&r.body);
        Ok(0)
    })
}

/// The state of container `name` in `ephemeralContainerStatuses`.
fn ephemeral_state(s: &std::path::Path, name: &str) -> Result<serde_json::Value, Failure> {
    let pod: serde_json::Value = serde_json::from_slice(&get(s, "/v1/pod")?.body)
        .map_err(|e| format!("bad answer from the pod: {e}"))?;
    Ok(pod["status"]["ephemeralContainerStatuses"]
        .as_array()
        .and_then(|v| v.iter().find(|c| c["name"] == name))
        .map(|c| c["state"].clone())
        .unwrap_or_default())
}

pub fn debug(
    p: Pick,
    image: String,
    target: Option<String>,
    name: Option<String>,
    command: Vec<String>,
) -> i32 {
    run(|| {
        let s = p.live("debug")?;
        let named = name.is_some();
        let name = name.unwrap_or_else(|| format!("debugger-{}", crate::util::random_hex(3)));
        let mut ec = serde_json::json!({"name": name, "image": image});
        if !command.is_empty() {
            ec["command"] = serde_json::json!(command);
        }
        if let Some(t) = target {
            ec["targetContainerName"] = serde_json::json!(t);
        }
        let body = ec.to_string();
        ok(client::request(
            &s,
            "POST",
            "/v1/ephemeralcontainers",
            Some(body.as_bytes()),
            TIMEOUT,
        )
        .map_err(|e| e.to_string())?)?;
        // As kubectl: said only of a name it made up.
        if !named {
            eprintln!("Defaulting debug container name to {name}.");
        }
        // Its output from the start, once it runs, then its exit code.
        loop {
            let st = ephemeral_state(&s, &name)?;
            if st.get("running").is_some() || st.get("terminated").is_some() {
                break;
            }
            if let Some(w) = st
                .get("waiting")
                .filter(|w| w["reason"] != "ContainerCreating")
            {
                return Err(Failure::from(format!(
                    "container {name}: {}: {}",
                    w["reason"].as_str().unwrap_or(""),
                    w["message"].as_str().unwrap_or("")
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut out = std::io::stdout();
        let r = client::stream(
            &s,
            &format!("/v1/containers/{name}/log?follow=true"),
            &mut |d| {
                let _ = out.write_all(d);
                let _ = out.flush();
            },
        )
        .map_err(|e| e.to_string())?;
        let _ = out.write_all(&ok(r)?.body);
        loop {
            let st = ephemeral_state(&s, &name)?;
            if let Some(t) = st.get("terminated") {
                // A process that never ran has no output to explain its exit.
                if t["reason"] == "StartError" {
                    crate::log::error(&format!(
                        "container {name}: StartError: {}",
                        t["message"].as_str().unwrap_or("")
                    ));
                }
                return Ok(t["exitCode"].as_i64().unwrap_or(1) as i32);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    })
}

pub fn condition(
    p: Pick,
    t: &str,
    status: &str,
    reason: Option<String>,
    message: Option<String>,
) -> i32 {
    run(|| {
        let s = p.live("condition")?;
        let body =
            serde_json::json!({"status": status, "reason": reason, "message": message}).to_string();
        let r = client::request(
            &s,
            "PUT",
            &format!("/v1/pod/conditions/{t}"),
            Some(body.as_bytes()),
            TIMEOUT,
        )
        .map_err(|e| e.to_string())?;
        ok(r)?;
        Ok(0)
    })
}

/// `podinit resize --patch JSON`: the `resize` subresource; prints the Pod it answers.
pub fn resize(p: Pick, patch: &str) -> i32 {
    run(|| {
        let s = p.live("resize")?;
        let r = client::request(
            &s,
            "PATCH",
            "/v1/pod/resize",
            Some(patch.as_bytes()),
            TIMEOUT,
        )
        .map_err(|e| e.to_string())?;
        let r = ok(r)?;
        let v: serde_json::Value =
            serde_json::from_slice(&r.body).map_err(|e| format!("the pod: {e}"))?;
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        Ok(0)
    })
}

pub fn exec(p: Pick, container: &str, timeout: u64, command: Vec<String>) -> i32 {
    run(|| {
        let s = p.live("exec")?;
        let body = serde_json::json!({"command": command, "timeoutSeconds": timeout}).to_string();
        // The answer comes when the command exits.
        let wait = if timeout > 0 {
            Duration::from_secs(timeout + 10)
        } else {
            Duration::from_secs(u32::MAX as u64)
        };
        let r = client::request(
            &s,
            "POST",
            &format!("/v1/containers/{container}/exec"),
            Some(body.as_bytes()),
            wait,
        )
        .map_err(|e| e.to_string())?;
        let r = ok(r)?;
        let v: serde_json::Value =
            serde_json::from_slice(&r.body).map_err(|e| format!("bad answer from the pod: {e}"))?;
        let _ = std::io::stdout().write_all(v["stdout"].as_str().unwrap_or("").as_bytes());
        let _ = std::io::stderr().write_all(v["stderr"].as_str().unwrap_or("").as_bytes());
        Ok(v["exitCode"].as_i64().unwrap_or(1) as i32)
    })
}

/// `podinit attach`: as `kubectl attach`, the container's output to stdout and, with
/// `-i`, stdin to the container; with a terminal, the local one in raw mode and its size
/// passed on.
pub fn attach(p: Pick, container: &str, stdin: bool, tty: bool) -> i32 {
    run(|| {
        let s = p.live("attach")?;
        let pod: serde_json::Value = serde_json::from_slice(&get(&s, "/v1/pod")?.body)
            .map_err(|e| format!("bad answer from the pod: {e}"))?;
        let spec = &pod["spec"];
        let found = ["initContainers", "containers", "ephemeralContainers"]
            .iter()
            .filter_map(|l| spec[*l].as_array())
            .flatten()
            .find(|c| c["name"] == container);
        let (mut tty, mut stdin) = (tty, stdin);
        if let Some(c) = found {
            let has_tty = c["tty"] == true;
            // kubectl attach's words and choices: a terminal only where the container has one,
            // and always where it has (its output has no stderr of its own).
            if tty && !has_tty {
                tty = false;
                eprintln!(
                    "error: Unable to use a TTY - container {container} did not allocate one"
                );
            } else if !tty && has_tty {
                tty = true;
            }
            // The CRI drops input to a container without `stdin: true`; say so.
            if stdin && c["stdin"] != true {
                eprintln!("warning: container {container} does not take input (stdin is not true): -i is ignored");
                stdin = false;
            }
        }
        // As kubectl's SetupTTY: raw mode only for a terminal fed from a terminal.
        let raw = tty && stdin && nix::unistd::isatty(std::io::stdin()).unwrap_or(false);
        eprintln!("If you don't see a command prompt, try pressing enter.");
        let path = format!("/v1/containers/{container}/attach?stdin={stdin}");
        let mut conn = match client::attach(&s, &path).map_err(|e| e.to_string())? {
            Ok(c) => c,
            Err(r) => return Err(refused(&r)),
        };
        let saved = if raw { raw_mode() } else { None };
        if raw {
            resize_loop(s.clone(), container.to_string());
        }
        if stdin {
            let mut to = conn.get_ref().try_clone().map_err(|e| e.to_string())?;
            // A container may leave its input unread for as long as it likes.
            let _ = to.set_write_timeout(None);
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut std::io::stdin().lock(), &mut to);
                // The end of our input ends the session's input (`stdinOnce` acts on it).
                let _ = to.shutdown(std::net::Shutdown::Write);
            });
        }
        let mut out = std::io::stdout();
        let mut buf = [0u8; 16 << 10];
        loop {
            match std::io::Read::read(&mut conn, &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let _ = out.write_all(&buf[..n]);
                    let _ = out.flush();
                }
            }
        }
        if let Some(t) = saved {
            let _ = nix::sys::termios::tcsetattr(
                std::io::stdin(),
                nix::sys::termios::SetArg::TCSANOW,
                &t,
            );
        }
        if raw && pod["spec"]["restartPolicy"] == "Always" {
            println!("Session ended, resume using 'podinit attach {container} -i -t' command when the pod is running");
        }
        Ok(0)
    })
}

/// Put the local terminal in raw mode; returns what to restore.
fn raw_mode() -> Option<nix::sys::termios::Termios> {
    use nix::sys::termios::{cfmakeraw, tcgetattr, tcsetattr, SetArg};
    let saved = tcgetattr(std::io::stdin()).ok()?;
    let mut raw = saved.clone();
    cfmakeraw(&mut raw);
    tcsetattr(std::io::stdin(), SetArg::TCSANOW, &raw).ok()?;
    Some(saved)
}

/// Pass the local terminal's size to the container's, now and whenever it changes. As
/// kubectl does, the first size sent is one larger, so that a program already running
/// redraws its screen on the real one.
fn resize_loop(s: PathBuf, container: String) {
    use std::os::fd::AsRawFd;
    std::thread::spawn(move || {
        let send = |(rows, cols): (u16, u16)| {
            let body = serde_json::json!({"width": cols, "height": rows}).to_string();
            let _ = client::request(
                &s,
                "POST",
                &format!("/v1/containers/{container}/resize"),
                Some(body.as_bytes()),
                TIMEOUT,
            );
        };
        let size = || crate::sys::pty::size(std::io::stdout().as_raw_fd()).ok();
        let mut last = size();
        if let Some((r, c)) = last {
            send((r.saturating_add(1), c.saturating_add(1)));
            send((r, c));
        }
        loop {
            std::thread::sleep(Duration::from_millis(250));
            let now = size();
            if now != last {
                if let Some(sz) = now {
                    send(sz);
                }
                last = now;
            }
        }
    });
}

pub fn stop(p: Pick, grace: Option<u64>) -> i32 {
    run(|| {
        let s = p.live("stop")?;
        let body = match grace {
            Some(g) => serde_json::json!({"gracePeriodSeconds": g}).to_string(),
            None => String::new(),
        };
        let r = client::request(
            &s,
            "POST",
            "/v1/pod/terminate",
            Some(body.as_bytes()),
            TIMEOUT,
        )
        .map_err(|e| e.to_string())?;
        ok(r)?;
        Ok(0)
    })
}

/// `podinit pods`: every pod under the state root, running or ended, from its kept
/// `status.json` (replaced on every change, so current for a running pod too).
pub fn pods(root: &std::path::Path, output: &str) -> i32 {
    run(|| {
        let mut items = Vec::new();
        for p in pods::list(root) {
            match p.pod() {
                Ok(pod) => items.push(pod),
                // Starting: no status written yet.
                Err(_) => items.push(serde_json::json!({
                    "metadata": {"name": p.name, "namespace": p.namespace},
                    "status": {"phase": "Pending"},
                })),
            }
        }
        if output == "json" {
            let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
            println!(
                "{}",
                serde_json::to_string_pretty(&list).unwrap_or_default()
            );
            return Ok(0);
        }
        if items.is_empty() {
            // As kubectl: said on stderr, so that a pipe reads an empty list.
            eprintln!("No resources found under {}.", root.display());
            return Ok(0);
        }
        print!(
            "{}",
            crate::status::table::render_list(&items, output == "wide", now_secs())
        );
        Ok(0)
    })
}

/// `podinit rm POD`: as kubectl's `pod "NAME" deleted`.
pub fn rm(pod: &str, root: &std::path::Path) -> i32 {
    run(|| {
        let p = pods::remove(pod, root)?;
        println!("pod \"{}\" deleted from {}", p.key(), root.display());
        Ok(0)
    })
}
