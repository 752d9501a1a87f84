//! The client commands (`status`, `events`, `logs`, `exec`, `debug`, `condition`, `stop`,
//! `attach`): one request each over the pod's status socket.

use crate::api::client::{self, Response};
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(10);

fn sock(s: Option<PathBuf>) -> Result<PathBuf, String> {
    client::socket_path(s.as_deref())
        .ok_or_else(|| "no socket: give --socket PATH or set $PODINIT_SOCKET".to_string())
}

/// Run `f`, print its error as one line; the exit status.
fn run(f: impl FnOnce() -> Result<i32, String>) -> i32 {
    match f() {
        Ok(code) => code,
        Err(e) => {
            crate::log::error(&e);
            1
        }
    }
}

fn ok(r: Response) -> Result<Response, String> {
    if (200..300).contains(&r.code) {
        Ok(r)
    } else {
        Err(r.error_message())
    }
}

fn get(s: &std::path::Path, path: &str) -> Result<Response, String> {
    ok(client::request(s, "GET", path, None, TIMEOUT).map_err(|e| e.to_string())?)
}

pub fn status(s: Option<PathBuf>, output: &str) -> i32 {
    run(|| {
        let s = sock(s)?;
        let r = get(&s, "/v1/pod")?;
        let pod: serde_json::Value = serde_json::from_slice(&r.body).map_err(|e| e.to_string())?;
        let now = (crate::util::now_unix_nanos() / 1_000_000_000) as i64;
        let text = match output {
            "json" => serde_json::to_string_pretty(&pod).unwrap_or_default() + "\n",
            "yaml" => serde_yaml_ng::to_string(&pod).unwrap_or_default(),
            wide => crate::status::table::render(&pod, wide == "wide", now),
        };
        print!("{text}");
        Ok(0)
    })
}

fn print_event(e: &serde_json::Value) {
    println!(
        "{}\t{}\t{}\t{}\t{}",
        e["lastTimestamp"].as_str().unwrap_or(""),
        e["type"].as_str().unwrap_or(""),
        e["reason"].as_str().unwrap_or(""),
        e["involvedObject"]["fieldPath"].as_str().unwrap_or("pod"),
        e["message"].as_str().unwrap_or("")
    );
}

pub fn events(s: Option<PathBuf>, watch: bool) -> i32 {
    run(|| {
        let s = sock(s)?;
        if watch {
            let mut buf = Vec::new();
            let r = client::stream(&s, "/v1/events?watch=true", &mut |d| {
                buf.extend_from_slice(d);
                while let Some(n) = buf.iter().position(|&b| b == b'\n') {
                    if let Ok(e) = serde_json::from_slice::<serde_json::Value>(&buf[..n]) {
                        print_event(&e);
                    }
                    buf.drain(..=n);
                }
            })
            .map_err(|e| e.to_string())?;
            ok(r)?;
            return Ok(0);
        }
        let r = get(&s, "/v1/events")?;
        let v: serde_json::Value = serde_json::from_slice(&r.body).map_err(|e| e.to_string())?;
        println!("LAST SEEN\tTYPE\tREASON\tOBJECT\tMESSAGE");
        for e in v["items"].as_array().into_iter().flatten() {
            print_event(e);
        }
        Ok(0)
    })
}

pub fn logs(
    s: Option<PathBuf>,
    c: &str,
    follow: bool,
    previous: bool,
    tail: Option<u64>,
    ts: bool,
) -> i32 {
    run(|| {
        let s = sock(s)?;
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
fn ephemeral_state(s: &std::path::Path, name: &str) -> Result<serde_json::Value, String> {
    let pod: serde_json::Value = serde_json::from_slice(&get(s, "/v1/pod")?.body)
        .map_err(|e| format!("bad answer from the pod: {e}"))?;
    Ok(pod["status"]["ephemeralContainerStatuses"]
        .as_array()
        .and_then(|v| v.iter().find(|c| c["name"] == name))
        .map(|c| c["state"].clone())
        .unwrap_or_default())
}

pub fn debug(
    s: Option<PathBuf>,
    image: String,
    target: Option<String>,
    name: Option<String>,
    command: Vec<String>,
) -> i32 {
    run(|| {
        let s = sock(s)?;
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
                return Err(format!(
                    "container {name}: {}: {}",
                    w["reason"].as_str().unwrap_or(""),
                    w["message"].as_str().unwrap_or("")
                ));
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
    s: Option<PathBuf>,
    t: &str,
    status: &str,
    reason: Option<String>,
    message: Option<String>,
) -> i32 {
    run(|| {
        let s = sock(s)?;
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
pub fn resize(s: Option<PathBuf>, patch: &str) -> i32 {
    run(|| {
        let s = sock(s)?;
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

pub fn exec(s: Option<PathBuf>, container: &str, timeout: u64, command: Vec<String>) -> i32 {
    run(|| {
        let s = sock(s)?;
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
pub fn attach(s: Option<PathBuf>, container: &str, stdin: bool, tty: bool) -> i32 {
    run(|| {
        let s = sock(s)?;
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
            Err(r) => return Err(r.error_message()),
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

pub fn stop(s: Option<PathBuf>, grace: Option<u64>) -> i32 {
    run(|| {
        let s = sock(s)?;
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
