//! What containerd says to `start` on its standard input, and the answer each release
//! reads (docs/cri.md §5).
//!
//! containerd 2.3 and later write a `containerd.runtime.bootstrap.v1.BootstrapParams`
//! (its own version, addresses, the directory for shim sockets, the runtime options as
//! extensions) and read a `BootstrapResult` first: there the shim answers version 3
//! (the Task service as `containerd.task.v3.Task`, one shim per pod without a `start`
//! per container). Earlier releases write the runtime options' `Any` or nothing, and
//! read a bare address (1.6 reads nothing else; 1.7 to 2.2 take it as version 2): they
//! get that. The rust-extensions crates speak one of the two only, hence these few
//! lines of protobuf by hand. `-info` (containerd 1.7 and later) is answered here too.

/// The fields of containerd's `BootstrapParams` the shim uses.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Params {
    pub containerd_version: String,
    pub namespace: String,
    /// Where containerd wants the shims' sockets (its `socket_dir`).
    pub socket_dir: Option<String>,
}

/// The shim protocol version answered to a containerd that sent its `BootstrapParams`.
pub const VERSION: u64 = 3;

/// `BootstrapParams` from `start`'s standard input, when that is what containerd wrote:
/// its version is set and its namespace is the one on the command line (an older
/// containerd's options `Any` has string fields 1 and 2 too).
pub fn parse(input: &[u8], namespace: &str) -> Option<Params> {
    let mut p = Params::default();
    let mut r = Reader(input);
    while !r.0.is_empty() {
        let key = r.varint()?;
        match (key >> 3, key & 7) {
            (2, 2) => p.namespace = String::from_utf8(r.bytes()?.to_vec()).ok()?,
            (4, 2) => p.containerd_version = String::from_utf8(r.bytes()?.to_vec()).ok()?,
            (9, 2) => p.socket_dir = Some(String::from_utf8(r.bytes()?.to_vec()).ok()?),
            (_, 0) => drop(r.varint()?),
            (_, 1) => r.skip(8)?,
            (_, 2) => drop(r.bytes()?),
            (_, 5) => r.skip(4)?,
            _ => return None,
        }
    }
    (!p.containerd_version.is_empty() && p.namespace == namespace).then_some(p)
}

/// The runtime options containerd hands `start`: on stdin as an `Any` (containerd 1.6 to
/// 2.2), or as an extension of 2.3's `BootstrapParams`. Their type URL and value.
pub fn options(input: &[u8]) -> Option<(String, Vec<u8>)> {
    let mut r = Reader(input);
    let (mut url, mut value, mut extension, mut params) = (None, Vec::new(), None, false);
    while !r.0.is_empty() {
        let key = r.varint()?;
        match (key >> 3, key & 7) {
            (1, 2) => url = String::from_utf8(r.bytes()?.to_vec()).ok(),
            (2, 2) => value = r.bytes()?.to_vec(),
            // containerd_version: these are BootstrapParams, whose 1 and 2 are not an Any's.
            (4, 2) => params = r.bytes().is_some(),
            (8, 2) => extension = Some(r.bytes()?),
            (_, 0) => drop(r.varint()?),
            (_, 1) => r.skip(8)?,
            (_, 2) => drop(r.bytes()?),
            (_, 5) => r.skip(4)?,
            _ => return None,
        }
    }
    match extension {
        // An `Extension{value: Any}`: the `Any` is its field 1.
        Some(ext) => {
            let mut r = Reader(ext);
            (r.varint()? == 0x0a).then_some(())?;
            options(r.bytes()?)
        }
        None if params => None,
        None => url.filter(|u| !u.is_empty()).map(|u| (u, value)),
    }
}

/// The bundle's file where `start` leaves what the serving shim needs of the runtime
/// options later (containerd's runc shim keeps its options in the same file): a sandbox
/// made through the Sandbox API gets no options of its own.
const OPTIONS_FILE: &str = "options.json";

/// Leave `SystemdCgroup = true` in the bundle `dir` (nothing when false).
pub fn keep_systemd_cgroup(dir: &std::path::Path, on: bool) -> Result<(), super::error::Error> {
    if !on {
        return Ok(());
    }
    let path = dir.join(OPTIONS_FILE);
    std::fs::write(&path, br#"{"systemd_cgroup":true}"#)
        .map_err(|e| super::error::Error::io(format_args!("writing {}", path.display()), e))
}

/// Whether `start` left `SystemdCgroup = true` in the bundle `dir`.
pub fn kept_systemd_cgroup(dir: &std::path::Path) -> bool {
    std::fs::read(dir.join(OPTIONS_FILE))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .is_some_and(|v| v["systemd_cgroup"] == serde_json::Value::Bool(true))
}

/// Whether the runtime options are runc's with `SystemdCgroup = true`: the shim then
/// runs its runtime with `--systemd-cgroup`, as containerd's runc shim runs runc. A
/// handler of podinit's own type gets its options section as containerd's generic
/// `runtimeoptions.v1.Options`, the section's TOML in `config_body`, which may say the same.
pub fn systemd_cgroup(url: &str, value: &[u8]) -> bool {
    if url.ends_with("runtimeoptions.v1.Options") {
        return config_body(value).is_some_and(|body| toml_true(body, "SystemdCgroup"));
    }
    if !url.ends_with("containerd.runc.v1.Options") {
        return false;
    }
    let mut on = false;
    let mut r = Reader(value);
    while !r.0.is_empty() {
        let Some(key) = r.varint() else { break };
        let ok = match (key >> 3, key & 7) {
            (9, 0) => r.varint().map(|v| on = v != 0),
            (_, 0) => r.varint().map(drop),
            (_, 1) => r.skip(8),
            (_, 2) => r.bytes().map(drop),
            (_, 5) => r.skip(4),
            _ => None,
        };
        if ok.is_none() {
            break;
        }
    }
    on
}

/// `runtimeoptions.v1.Options`' `config_body` (field 3).
fn config_body(value: &[u8]) -> Option<&[u8]> {
    let mut r = Reader(value);
    let mut body = None;
    while !r.0.is_empty() {
        let key = r.varint()?;
        match (key >> 3, key & 7) {
            (3, 2) => body = Some(r.bytes()?),
            (_, 0) => drop(r.varint()?),
            (_, 1) => r.skip(8)?,
            (_, 2) => drop(r.bytes()?),
            (_, 5) => r.skip(4)?,
            _ => return None,
        }
    }
    body
}

/// Whether the TOML `body` (containerd's marshalling of a runtime's flat options
/// section) sets the top-level `key` to `true`.
fn toml_true(body: &[u8], key: &str) -> bool {
    let text = String::from_utf8_lossy(body);
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            break;
        }
        if let Some((k, v)) = line.split_once('=') {
            if k.trim().trim_matches('"') == key {
                return v.split('#').next().unwrap_or("").trim() == "true";
            }
        }
    }
    false
}

/// The runc handler's options (`containerd.runc.v1.Options`) the podinit handler cannot
/// honour, by their names in containerd's config: it runs its own runtime (`BinaryName`)
/// and keeps its state under containerd's (`Root`). Refused at `start`, never ignored in
/// silence. (`SystemdCgroup` it honours: [`systemd_cgroup`].)
pub fn refused_runc_options(url: &str, value: &[u8]) -> Vec<&'static str> {
    let mut out = Vec::new();
    if !url.ends_with("containerd.runc.v1.Options") {
        return out;
    }
    let mut r = Reader(value);
    while !r.0.is_empty() {
        let Some(key) = r.varint() else { break };
        let ok = match (key >> 3, key & 7) {
            (6, 2) => r
                .bytes()
                .map(|b| (!b.is_empty()).then(|| out.push("BinaryName"))),
            (7, 2) => r.bytes().map(|b| (!b.is_empty()).then(|| out.push("Root"))),
            (_, 0) => r.varint().map(drop).map(Some),
            (_, 1) => r.skip(8).map(Some),
            (_, 2) => r.bytes().map(drop).map(Some),
            (_, 5) => r.skip(4).map(Some),
            _ => None,
        };
        if ok.is_none() {
            break;
        }
    }
    out
}

/// `BootstrapResult{version: 3, address, protocol: "ttrpc"}`.
pub fn result(address: &str) -> Vec<u8> {
    let mut out = vec![0x08];
    varint(&mut out, VERSION);
    bytes_field(&mut out, 2, address.as_bytes());
    bytes_field(&mut out, 3, b"ttrpc");
    out
}

/// The type URL containerd registers the OCI features document under (its value is the
/// document's JSON).
const FEATURES_TYPE: &str = "types.containerd.io/opencontainers/runtime-spec/1/features/Features";

/// `-info`'s answer, a `containerd.types.RuntimeInfo`: the runtime's name and version, and
/// the OCI features document (`features` of the runc front-end), from which containerd 2's
/// CRI learns what the handler supports (recursive read-only mounts, user namespaces).
pub fn runtime_info(name: &str, version: &str, features: &serde_json::Value) -> Vec<u8> {
    let mut v = Vec::new();
    bytes_field(&mut v, 1, version.as_bytes());
    let mut any = Vec::new();
    bytes_field(&mut any, 1, FEATURES_TYPE.as_bytes());
    bytes_field(&mut any, 2, features.to_string().as_bytes());
    let mut out = Vec::new();
    bytes_field(&mut out, 1, name.as_bytes());
    bytes_field(&mut out, 2, &v);
    bytes_field(&mut out, 4, &any);
    out
}

fn bytes_field(out: &mut Vec<u8>, field: u64, b: &[u8]) {
    varint(out, field << 3 | 2);
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let (&b, rest) = self.0.split_first()?;
            self.0 = rest;
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Some(v);
            }
        }
        None
    }

    fn skip(&mut self, n: usize) -> Option<()> {
        self.0 = self.0.get(n..)?;
        Some(())
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.varint()?).ok()?;
        let (b, rest) = (self.0.get(..n)?, self.0.get(n..)?);
        self.0 = rest;
        Some(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(out: &mut Vec<u8>, n: u64, s: &[u8]) {
        varint(out, n << 3 | 2);
        varint(out, s.len() as u64);
        out.extend_from_slice(s);
    }

    #[test]
    fn containerd_2_3_s_params_are_read_and_older_options_are_not() {
        let mut b = Vec::new();
        field(&mut b, 1, b"pod1");
        field(&mut b, 2, b"k8s.io");
        b.extend_from_slice(&[0x18, 0x7c]); // log_level -4 as a varint field
        field(&mut b, 4, b"v2.3.4");
        field(&mut b, 8, b"\x0a\x05\x0a\x03x.y");
        field(&mut b, 9, b"/run/c2/s");
        let p = parse(&b, "k8s.io").unwrap();
        assert_eq!(p.containerd_version, "v2.3.4");
        assert_eq!(p.socket_dir.as_deref(), Some("/run/c2/s"));
        assert_eq!(parse(&b, "default"), None, "another namespace's");
        // containerd 1.6's runtime options: an Any, type URL and value.
        let mut any = Vec::new();
        field(&mut any, 1, b"containerd.runc.v1.Options");
        field(&mut any, 2, b"\x12\x04/run");
        assert_eq!(parse(&any, "k8s.io"), None);
        assert_eq!(parse(b"", "k8s.io"), None, "nothing on stdin");
        assert_eq!(parse(&[0x22, 0x09, b'v'], "k8s.io"), None, "cut short");
    }

    #[test]
    fn runtime_info_carries_the_features_document_as_containerd_types_it() {
        let doc = serde_json::json!({"mountOptions": ["rro"]});
        let info = runtime_info("io.containerd.podinit.v1", "0.1.0", &doc);
        let mut r = Reader(&info);
        assert_eq!(r.varint(), Some(0x0a));
        assert_eq!(r.bytes(), Some(&b"io.containerd.podinit.v1"[..]));
        assert_eq!(r.varint(), Some(0x12));
        assert_eq!(r.bytes(), Some(&b"\x0a\x050.1.0"[..]));
        assert_eq!(r.varint(), Some(0x22));
        let mut any = Reader(r.bytes().unwrap());
        assert!(r.0.is_empty());
        assert_eq!(any.varint(), Some(0x0a));
        assert_eq!(any.bytes(), Some(FEATURES_TYPE.as_bytes()));
        assert_eq!(any.varint(), Some(0x12));
        let json: serde_json::Value = serde_json::from_slice(any.bytes().unwrap()).unwrap();
        assert_eq!(json, doc);
    }

    #[test]
    fn runc_options_the_handler_cannot_honour_are_named_from_either_form() {
        // SystemdCgroup is honoured, not refused: read on its own.
        const URL: &str = "containerd.runc.v1.Options";
        let mut runc = Vec::new();
        field(&mut runc, 6, b"/usr/bin/crun");
        runc.extend_from_slice(&[0x48, 1]); // systemd_cgroup = true
        let mut any = Vec::new();
        field(&mut any, 1, URL.as_bytes());
        field(&mut any, 2, &runc);
        let (url, value) = options(&any).unwrap();
        assert_eq!(refused_runc_options(&url, &value), ["BinaryName"]);
        assert!(systemd_cgroup(&url, &value));
        // containerd 2.3: the same Any inside an extension of its BootstrapParams.
        let mut ext = Vec::new();
        field(&mut ext, 1, &any);
        let mut params = Vec::new();
        field(&mut params, 2, b"k8s.io");
        field(&mut params, 4, b"v2.3.4");
        field(&mut params, 8, &ext);
        let (url, value) = options(&params).unwrap();
        assert_eq!(refused_runc_options(&url, &value), ["BinaryName"]);
        assert!(systemd_cgroup(&url, &value));
        // Root set, SystemdCgroup false: Root only.
        let mut root = Vec::new();
        field(&mut root, 7, b"/run/x");
        root.extend_from_slice(&[0x48, 0]);
        assert_eq!(refused_runc_options(URL, &root), ["Root"]);
        assert!(!systemd_cgroup(URL, &root));
        assert!(!systemd_cgroup("runtimeoptions.v1.Options", &runc));
        // podinit's own type: the options section's TOML in config_body (field 3).
        let generic = |toml: &str| {
            let mut v = vec![0x1a, toml.len() as u8];
            v.extend_from_slice(toml.as_bytes());
            v
        };
        let url = "type.googleapis.com/runtimeoptions.v1.Options";
        assert!(systemd_cgroup(url, &generic("SystemdCgroup = true\n")));
        assert!(!systemd_cgroup(url, &generic("SystemdCgroup = false\n")));
        assert!(!systemd_cgroup(url, &generic("Other = true\n")));
        assert!(!systemd_cgroup(
            url,
            &generic("[x]\nSystemdCgroup = true\n")
        ));
        assert!(refused_runc_options(URL, b"").is_empty());
        assert!(refused_runc_options("runtimeoptions.v1.Options", &runc).is_empty());
        assert_eq!(options(b""), None);
        params.truncate(params.len() - ext.len() - 2);
        assert_eq!(options(&params), None, "BootstrapParams without options");
    }

    #[test]
    fn the_result_is_version_3_ttrpc_at_the_address() {
        let r = result("unix:///run/s/ab");
        assert_eq!(&r[..2], &[0x08, 3]);
        assert_eq!(r[2], 0x12);
        assert_eq!(&r[4..4 + r[3] as usize], b"unix:///run/s/ab");
        assert!(r.ends_with(b"\x1a\x05ttrpc"));
    }
}
