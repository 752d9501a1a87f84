//! A CRI v1 client for the tests: the generated gRPC client of the `k8s-cri` crate over
//! containerd's Unix socket, each call bounded, and a websocket client for the streaming
//! server's Exec URLs. The tests stay synchronous: every call runs to its end on a runtime
//! of the client's own.

#![allow(dead_code)]

use std::future::Future;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

pub use k8s_cri::v1 as api;
use k8s_cri::v1::image_service_client::ImageServiceClient;
use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
use tonic::transport::{Channel, Endpoint, Uri};

/// How long one CRI call may take: containerd answers in well under a second, but a stop
/// waits for its timeout and a slow shim for its own.
pub const CALL_LIMIT: Duration = Duration::from_secs(60);

pub type Rs = RuntimeServiceClient<Channel>;

pub struct Client {
    rt: tokio::runtime::Runtime,
    rs: Rs,
    is: ImageServiceClient<Channel>,
}

impl Client {
    /// Connect to the gRPC socket at `sock`; Err with why when it does not answer.
    pub fn connect(sock: &Path, limit: Duration) -> Result<Client, String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("tokio runtime: {e}"))?;
        let path = sock.to_path_buf();
        let connector = tower::service_fn(move |_: Uri| {
            let path = path.clone();
            async move {
                let s = tokio::net::UnixStream::connect(path).await?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(s))
            }
        });
        // The URI is a placeholder: the connector above decides where to connect.
        let endpoint = Endpoint::from_static("http://localhost");
        let channel = rt
            .block_on(async {
                tokio::time::timeout(limit, endpoint.connect_with_connector(connector)).await
            })
            .map_err(|_| format!("{}: no connection within {limit:?}", sock.display()))?
            .map_err(|e| format!("{}: {e}", sock.display()))?;
        Ok(Client {
            rt,
            rs: RuntimeServiceClient::new(channel.clone()),
            is: ImageServiceClient::new(channel),
        })
    }

    /// One call of the runtime service, bounded by `CALL_LIMIT` (past it, an error naming
    /// `what`).
    pub fn call<T, F, Fut>(&self, what: &str, f: F) -> Result<T, tonic::Status>
    where
        F: FnOnce(Rs) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        let fut = f(self.rs.clone());
        match self
            .rt
            .block_on(async { tokio::time::timeout(CALL_LIMIT, fut).await })
        {
            Ok(r) => r.map(tonic::Response::into_inner),
            Err(_) => Err(tonic::Status::deadline_exceeded(format!(
                "CRI {what}: no answer within {CALL_LIMIT:?}"
            ))),
        }
    }

    pub fn version(&self) -> Result<api::VersionResponse, tonic::Status> {
        self.call("Version", |mut c| async move {
            c.version(api::VersionRequest::default()).await
        })
    }

    /// RuntimeReady and NetworkReady, as the CRI's Status reports them.
    pub fn ready(&self) -> Result<(bool, bool), tonic::Status> {
        let st = self.call("Status", |mut c| async move {
            c.status(api::StatusRequest::default()).await
        })?;
        let cond = |t: &str| {
            st.status
                .as_ref()
                .map(|s| s.conditions.iter().any(|c| c.r#type == t && c.status))
                .unwrap_or(false)
        };
        Ok((cond("RuntimeReady"), cond("NetworkReady")))
    }

    pub fn images(&self) -> Vec<String> {
        let is = self.is.clone();
        let r = self
            .rt
            .block_on(async move {
                let mut is = is;
                tokio::time::timeout(
                    CALL_LIMIT,
                    is.list_images(api::ListImagesRequest::default()),
                )
                .await
            })
            .expect("CRI ListImages: no answer within the limit")
            .expect("CRI ListImages");
        r.into_inner()
            .images
            .into_iter()
            .flat_map(|i| i.repo_tags)
            .collect()
    }

    pub fn run_pod(
        &self,
        config: &api::PodSandboxConfig,
        handler: &str,
    ) -> Result<String, tonic::Status> {
        let req = api::RunPodSandboxRequest {
            config: Some(config.clone()),
            runtime_handler: handler.to_string(),
        };
        self.call("RunPodSandbox", |mut c| async move {
            c.run_pod_sandbox(req).await
        })
        .map(|r| r.pod_sandbox_id)
    }

    pub fn pod_status(&self, id: &str) -> api::PodSandboxStatusResponse {
        let req = api::PodSandboxStatusRequest {
            pod_sandbox_id: id.to_string(),
            verbose: true,
        };
        self.call("PodSandboxStatus", |mut c| async move {
            c.pod_sandbox_status(req).await
        })
        .unwrap_or_else(|e| panic!("PodSandboxStatus of {id}: {e}"))
    }

    pub fn list_pods(&self) -> Vec<api::PodSandbox> {
        self.try_list_pods().expect("ListPodSandbox")
    }

    pub fn try_list_pods(&self) -> Result<Vec<api::PodSandbox>, tonic::Status> {
        self.call("ListPodSandbox", |mut c| async move {
            c.list_pod_sandbox(api::ListPodSandboxRequest::default())
                .await
        })
        .map(|r| r.items)
    }

    pub fn stop_pod(&self, id: &str) -> Result<(), tonic::Status> {
        let req = api::StopPodSandboxRequest {
            pod_sandbox_id: id.to_string(),
        };
        self.call("StopPodSandbox", |mut c| async move {
            c.stop_pod_sandbox(req).await
        })
        .map(drop)
    }

    pub fn remove_pod(&self, id: &str) -> Result<(), tonic::Status> {
        let req = api::RemovePodSandboxRequest {
            pod_sandbox_id: id.to_string(),
        };
        self.call("RemovePodSandbox", |mut c| async move {
            c.remove_pod_sandbox(req).await
        })
        .map(drop)
    }

    pub fn create_container(
        &self,
        pod: &str,
        config: &api::ContainerConfig,
        pod_config: &api::PodSandboxConfig,
    ) -> Result<String, tonic::Status> {
        // As the kubelet does: a container's namespaces are its pod's, unless it says.
        let mut config = config.clone();
        let pod_ns = pod_config
            .linux
            .as_ref()
            .and_then(|l| l.security_context.as_ref())
            .and_then(|s| s.namespace_options.clone());
        let sc = config
            .linux
            .get_or_insert_with(Default::default)
            .security_context
            .get_or_insert_with(Default::default);
        if sc.namespace_options.is_none() {
            sc.namespace_options = pod_ns;
        }
        let req = api::CreateContainerRequest {
            pod_sandbox_id: pod.to_string(),
            config: Some(config),
            sandbox_config: Some(pod_config.clone()),
        };
        self.call("CreateContainer", |mut c| async move {
            c.create_container(req).await
        })
        .map(|r| r.container_id)
    }

    pub fn start_container(&self, id: &str) -> Result<(), tonic::Status> {
        let req = api::StartContainerRequest {
            container_id: id.to_string(),
        };
        self.call("StartContainer", |mut c| async move {
            c.start_container(req).await
        })
        .map(drop)
    }

    pub fn container_status(&self, id: &str) -> api::ContainerStatusResponse {
        let req = api::ContainerStatusRequest {
            container_id: id.to_string(),
            verbose: true,
        };
        self.call("ContainerStatus", |mut c| async move {
            c.container_status(req).await
        })
        .unwrap_or_else(|e| panic!("ContainerStatus of {id}: {e}"))
    }

    pub fn list_containers(&self, pod: &str) -> Vec<api::Container> {
        let req = api::ListContainersRequest {
            filter: Some(api::ContainerFilter {
                pod_sandbox_id: pod.to_string(),
                ..Default::default()
            }),
        };
        self.call("ListContainers", |mut c| async move {
            c.list_containers(req).await
        })
        .expect("ListContainers")
        .containers
    }

    pub fn stop_container(&self, id: &str, timeout_s: i64) -> Result<(), tonic::Status> {
        let req = api::StopContainerRequest {
            container_id: id.to_string(),
            timeout: timeout_s,
        };
        self.call("StopContainer", |mut c| async move {
            c.stop_container(req).await
        })
        .map(drop)
    }

    pub fn remove_container(&self, id: &str) -> Result<(), tonic::Status> {
        let req = api::RemoveContainerRequest {
            container_id: id.to_string(),
        };
        self.call("RemoveContainer", |mut c| async move {
            c.remove_container(req).await
        })
        .map(drop)
    }

    pub fn exec_sync(
        &self,
        id: &str,
        cmd: &[&str],
        timeout_s: i64,
    ) -> Result<api::ExecSyncResponse, tonic::Status> {
        let req = api::ExecSyncRequest {
            container_id: id.to_string(),
            cmd: cmd.iter().map(|s| s.to_string()).collect(),
            timeout: timeout_s,
        };
        self.call("ExecSync", |mut c| async move { c.exec_sync(req).await })
    }

    /// The streaming server's URL for an exec of `cmd` with stdout and stderr (and stdin
    /// when asked).
    pub fn exec_url(&self, id: &str, cmd: &[&str], stdin: bool) -> Result<String, tonic::Status> {
        let req = api::ExecRequest {
            container_id: id.to_string(),
            cmd: cmd.iter().map(|s| s.to_string()).collect(),
            tty: false,
            stdin,
            stdout: true,
            stderr: true,
        };
        self.exec_url_for(req)
    }

    /// The streaming server's URL to attach to container `id`'s stdin and stdout.
    pub fn attach_url(&self, id: &str) -> Result<String, tonic::Status> {
        let req = api::AttachRequest {
            container_id: id.to_string(),
            stdin: true,
            stdout: true,
            stderr: true,
            tty: false,
        };
        self.call("Attach", |mut c| async move { c.attach(req).await })
            .map(|r| r.url)
    }

    /// The streaming server's URL for an exec as `req` asks.
    pub fn exec_url_for(&self, req: api::ExecRequest) -> Result<String, tonic::Status> {
        self.call("Exec", |mut c| async move { c.exec(req).await })
            .map(|r| r.url)
    }

    pub fn container_stats(&self, pod: &str) -> Vec<api::ContainerStats> {
        let req = api::ListContainerStatsRequest {
            filter: Some(api::ContainerStatsFilter {
                pod_sandbox_id: pod.to_string(),
                ..Default::default()
            }),
        };
        self.call("ListContainerStats", |mut c| async move {
            c.list_container_stats(req).await
        })
        .expect("ListContainerStats")
        .stats
    }

    pub fn update_resources(
        &self,
        id: &str,
        res: api::LinuxContainerResources,
    ) -> Result<(), tonic::Status> {
        let req = api::UpdateContainerResourcesRequest {
            container_id: id.to_string(),
            linux: Some(res),
            ..Default::default()
        };
        self.call("UpdateContainerResources", |mut c| async move {
            c.update_container_resources(req).await
        })
        .map(drop)
    }
}

/// What an exec through the streaming server gave: its output per stream and the status
/// the server wrote on the error channel (JSON, `{}` when it wrote none).
#[derive(Debug, Default)]
pub struct Streamed {
    pub stdout: String,
    pub stderr: String,
    pub status: serde_json::Value,
}

impl Streamed {
    /// The exit code the status carries: 0 on `Success`, the `ExitCode` cause otherwise.
    pub fn exit_code(&self) -> Option<i32> {
        if self.status["status"] == "Success" {
            return Some(0);
        }
        self.status["details"]["causes"]
            .as_array()?
            .iter()
            .find(|c| c["reason"] == "ExitCode")?["message"]
            .as_str()?
            .parse()
            .ok()
    }
}

/// Speak Kubernetes' websocket remote-command protocol (`v4.channel.k8s.io`) to an Exec
/// URL of the CRI's streaming server: each binary message's first byte names its stream
/// (0 stdin, 1 stdout, 2 stderr, 3 the status). `stdin`, when given, is sent as one
/// message: the v4 protocol cannot close stdin, so the command must end on its own.
pub fn stream_exec(url: &str, stdin: Option<&[u8]>, limit: Duration) -> Result<Streamed, String> {
    let input: Vec<(u8, &[u8])> = stdin.map(|i| (0u8, i)).into_iter().collect();
    stream(url, &input, None, limit)
}

/// One session with the streaming server (an Exec or Attach URL): send each `(stream,
/// bytes)` of `input` as a message (stream 0 is stdin, 4 a terminal's size as JSON), then
/// read until the server ends the session or, when `until` is given, until stdout holds
/// it: then the client closes the session itself (as a detaching `kubectl attach` does).
pub fn stream(
    url: &str,
    input: &[(u8, &[u8])],
    until: Option<&str>,
    limit: Duration,
) -> Result<Streamed, String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("exec URL {url} is not http://"))?;
    let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let mut s = TcpStream::connect(host).map_err(|e| format!("connecting to {host}: {e}"))?;
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: cG9kaW5pdC1jcmktdGVzdA==\r\nSec-WebSocket-Version: 13\r\n\
         Sec-WebSocket-Protocol: v4.channel.k8s.io\r\n\r\n"
    );
    s.write_all(req.as_bytes())
        .map_err(|e| format!("{url}: {e}"))?;
    let deadline = Instant::now() + limit;
    let mut buf = Vec::new();
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if !read_more(&mut s, &mut buf, deadline)? {
            return Err(format!("{url}: closed during the handshake"));
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    if !head.starts_with("HTTP/1.1 101") {
        return Err(format!("{url}: no upgrade: {head}"));
    }
    buf.drain(..head_end);
    for (stream, bytes) in input {
        let mut msg = vec![*stream];
        msg.extend_from_slice(bytes);
        s.write_all(&client_frame(&msg))
            .map_err(|e| format!("{url}: sending to stream {stream}: {e}"))?;
    }
    let mut out = Streamed {
        status: serde_json::json!({}),
        ..Default::default()
    };
    let mut streams: [Vec<u8>; 4] = Default::default();
    let mut last = 1usize;
    loop {
        match parse_frame(&buf) {
            Some((fin_opcode, payload, used)) => {
                buf.drain(..used);
                let opcode = fin_opcode & 0x0f;
                match opcode {
                    0x8 => break,
                    0x1 | 0x2 if !payload.is_empty() => {
                        last = payload[0] as usize;
                        if let Some(st) = streams.get_mut(last) {
                            st.extend_from_slice(&payload[1..]);
                        }
                    }
                    0x0 => {
                        if let Some(st) = streams.get_mut(last) {
                            st.extend_from_slice(&payload);
                        }
                    }
                    _ => {}
                }
            }
            None => {
                if let Some(needle) = until {
                    if String::from_utf8_lossy(&streams[1]).contains(needle) {
                        // A close frame (code 1000), then the connection's end.
                        let _ = s.write_all(&[0x88, 0x82, 0, 0, 0, 0, 0x03, 0xe8]);
                        let _ = s.shutdown(std::net::Shutdown::Both);
                        break;
                    }
                }
                if !read_more(&mut s, &mut buf, deadline)? {
                    break;
                }
            }
        }
    }
    out.stdout = String::from_utf8_lossy(&streams[1]).into_owned();
    out.stderr = String::from_utf8_lossy(&streams[2]).into_owned();
    if !streams[3].is_empty() {
        out.status = serde_json::from_slice(&streams[3]).map_err(|e| {
            format!(
                "{url}: status {:?}: {e}",
                String::from_utf8_lossy(&streams[3])
            )
        })?;
    }
    Ok(out)
}

/// Read what is there into `buf`: false at the end of the stream; an error past the
/// deadline.
fn read_more(s: &mut TcpStream, buf: &mut Vec<u8>, deadline: Instant) -> Result<bool, String> {
    let mut chunk = [0u8; 16384];
    loop {
        match s.read(&mut chunk) {
            Ok(0) => return Ok(false),
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                return Ok(true);
            }
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                if Instant::now() > deadline {
                    return Err("the exec stream did not end in time".into());
                }
            }
            Err(e) => return Err(format!("reading the exec stream: {e}")),
        }
    }
}

/// One whole frame at the start of `buf`: (first byte, payload, bytes used).
fn parse_frame(buf: &[u8]) -> Option<(u8, Vec<u8>, usize)> {
    if buf.len() < 2 {
        return None;
    }
    let masked = buf[1] & 0x80 != 0;
    let (len, mut at) = match buf[1] & 0x7f {
        126 => (
            u16::from_be_bytes(buf.get(2..4)?.try_into().ok()?) as usize,
            4,
        ),
        127 => (
            u64::from_be_bytes(buf.get(2..10)?.try_into().ok()?) as usize,
            10,
        ),
        n => (n as usize, 2),
    };
    let mask = if masked {
        let m: [u8; 4] = buf.get(at..at + 4)?.try_into().ok()?;
        at += 4;
        Some(m)
    } else {
        None
    };
    let mut payload = buf.get(at..at + len)?.to_vec();
    if let Some(m) = mask {
        for (i, b) in payload.iter_mut().enumerate() {
            *b ^= m[i % 4];
        }
    }
    Some((buf[0], payload, at + len))
}

/// A final binary frame from the client, masked as RFC 6455 requires of clients.
fn client_frame(payload: &[u8]) -> Vec<u8> {
    let mask = [0x5a, 0x17, 0xc3, 0x9e];
    let mut f = vec![0x82];
    match payload.len() {
        n if n < 126 => f.push(0x80 | n as u8),
        n if n < 65536 => {
            f.push(0x80 | 126);
            f.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            f.push(0x80 | 127);
            f.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    f.extend_from_slice(&mask);
    f.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    f
}
