//! HTTP/1.1 framing for the status socket: request parsing with `httparse` under hard size
//! limits, and response encoding (plain and chunked). No I/O here.

/// Request line and headers, at most (docs/architecture.md §2).
pub const MAX_HEAD: usize = 16 << 10;
/// Request body, at most.
pub const MAX_BODY: usize = 1 << 20;
const MAX_HEADERS: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    /// Path without the query, percent-decoded.
    pub path: String,
    /// Query parameters in order, percent-decoded.
    pub query: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// `Connection: close` was asked for (or HTTP/1.0 without keep-alive).
    pub close: bool,
    /// An HTTP/1.0 client: it knows no chunked encoding.
    pub http10: bool,
    /// `Content-Type`, without parameters, lowercased.
    pub content_type: Option<String>,
}

impl Request {
    pub fn param(&self, key: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// Why a request could not be parsed; each maps to a status code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseError {
    /// 400
    Malformed(String),
    /// 431
    HeadTooLarge,
    /// 413
    BodyTooLarge,
    /// 411 / 501: bodies must come with Content-Length.
    Unsupported(String),
}

impl ParseError {
    pub fn code(&self) -> u16 {
        match self {
            ParseError::Malformed(_) => 400,
            ParseError::HeadTooLarge => 431,
            ParseError::BodyTooLarge => 413,
            ParseError::Unsupported(_) => 501,
        }
    }
    pub fn message(&self) -> String {
        match self {
            ParseError::Malformed(m) => format!("malformed request: {m}"),
            ParseError::HeadTooLarge => format!("request head larger than {MAX_HEAD} bytes"),
            ParseError::BodyTooLarge => format!("request body larger than {MAX_BODY} bytes"),
            ParseError::Unsupported(m) => m.clone(),
        }
    }
}

/// Parse one request from the start of `buf`. `Ok(None)`: incomplete, read more.
/// `Ok(Some((req, n)))`: a request that used the first `n` bytes.
pub fn parse(buf: &[u8]) -> Result<Option<(Request, usize)>, ParseError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let head_len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => {
            return if buf.len() > MAX_HEAD {
                Err(ParseError::HeadTooLarge)
            } else {
                Ok(None)
            };
        }
        Err(httparse::Error::TooManyHeaders) => return Err(ParseError::HeadTooLarge),
        Err(e) => return Err(ParseError::Malformed(e.to_string())),
    };
    if head_len > MAX_HEAD {
        return Err(ParseError::HeadTooLarge);
    }
    let method = req.method.unwrap_or_default().to_string();
    let target = req.path.unwrap_or_default();
    let version = req.version.unwrap_or(1);
    let mut content_length: Option<usize> = None;
    let mut close = version == 0;
    let mut content_type = None;
    for h in req.headers.iter() {
        let value = std::str::from_utf8(h.value)
            .map_err(|_| ParseError::Malformed(format!("header {} is not UTF-8", h.name)))?
            .trim();
        if h.name.eq_ignore_ascii_case("content-length") {
            let n: usize = value
                .parse()
                .map_err(|_| ParseError::Malformed(format!("Content-Length {value:?}")))?;
            if content_length.is_some_and(|c| c != n) {
                return Err(ParseError::Malformed("conflicting Content-Length".into()));
            }
            content_length = Some(n);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(ParseError::Unsupported(
                "Transfer-Encoding in requests is not supported: send Content-Length".into(),
            ));
        } else if h.name.eq_ignore_ascii_case("content-type") {
            let t = value.split(';').next().unwrap_or_default().trim();
            content_type = Some(t.to_ascii_lowercase());
        } else if h.name.eq_ignore_ascii_case("connection") {
            let v = value.to_ascii_lowercase();
            if v.contains("close") {
                close = true;
            } else if v.contains("keep-alive") {
                close = false;
            }
        }
    }
    let body_len = content_length.unwrap_or(0);
    if body_len > MAX_BODY {
        return Err(ParseError::BodyTooLarge);
    }
    if buf.len() < head_len + body_len {
        return Ok(None);
    }
    let (path, query) = split_target(target)?;
    Ok(Some((
        Request {
            method,
            path,
            query,
            body: buf[head_len..head_len + body_len].to_vec(),
            close,
            http10: version == 0,
            content_type,
        },
        head_len + body_len,
    )))
}

fn split_target(target: &str) -> Result<(String, Vec<(String, String)>), ParseError> {
    if !target.starts_with('/') {
        return Err(ParseError::Malformed(format!("request target {target:?}")));
    }
    let (p, q) = target.split_once('?').unwrap_or((target, ""));
    let path = percent_decode(p).ok_or_else(|| ParseError::Malformed("bad %-escape".into()))?;
    let mut query = Vec::new();
    for pair in q.split('&').filter(|s| !s.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let k = percent_decode(&k.replace('+', " "))
            .ok_or_else(|| ParseError::Malformed("bad %-escape".into()))?;
        let v = percent_decode(&v.replace('+', " "))
            .ok_or_else(|| ParseError::Malformed("bad %-escape".into()))?;
        query.push((k, v));
    }
    Ok((path, query))
}

fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        411 => "Length Required",
        413 => "Payload Too Large",
        422 => "Unprocessable Entity",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Unknown",
    }
}

/// A complete response with a body.
pub fn response(code: u16, content_type: &str, body: &[u8], close: bool) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {code} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{}\r\n",
        reason(code),
        body.len(),
        if close { "Connection: close\r\n" } else { "" }
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

/// The head of a streamed response: chunked (chunks follow with [`chunk`]), or for an
/// HTTP/1.0 client, which knows no chunks, a body that ends when the connection closes.
pub fn stream_head(content_type: &str, chunked: bool) -> Vec<u8> {
    let framing = if chunked {
        "Transfer-Encoding: chunked"
    } else {
        "Connection: close"
    };
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\n{framing}\r\nCache-Control: no-cache\r\n\r\n"
    )
    .into_bytes()
}

/// One chunk; an empty `data` is the terminating chunk.
pub fn chunk(data: &[u8]) -> Vec<u8> {
    let mut out = format!("{:x}\r\n", data.len()).into_bytes();
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_get_with_query() {
        let raw = b"GET /v1/containers/web/log?tailLines=10&follow=true HTTP/1.1\r\nHost: pod\r\n\r\nextra";
        let (req, n) = parse(raw).unwrap().unwrap();
        assert_eq!(req.method, "GET");
        assert_eq!(req.path, "/v1/containers/web/log");
        assert_eq!(req.param("tailLines"), Some("10"));
        assert_eq!(req.param("follow"), Some("true"));
        assert_eq!(&raw[n..], b"extra");
        assert!(!req.close);
    }

    #[test]
    fn waits_for_the_whole_body() {
        let raw = b"POST /v1/pod/terminate HTTP/1.1\r\nContent-Length: 5\r\n\r\n{\"a\"";
        assert_eq!(parse(raw).unwrap(), None);
        let raw = b"POST /v1/pod/terminate HTTP/1.1\r\nContent-Length: 5\r\n\r\n{\"a\"}";
        let (req, _) = parse(raw).unwrap().unwrap();
        assert_eq!(req.body, b"{\"a\"}");
    }

    #[test]
    fn limits_hold() {
        let mut big = b"GET / HTTP/1.1\r\nX: ".to_vec();
        big.extend(std::iter::repeat_n(b'a', MAX_HEAD + 1));
        assert_eq!(parse(&big), Err(ParseError::HeadTooLarge));
        let raw = format!(
            "POST / HTTP/1.1\r\nContent-Length: {}\r\n\r\n",
            MAX_BODY + 1
        );
        assert_eq!(parse(raw.as_bytes()), Err(ParseError::BodyTooLarge));
        let raw = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert_eq!(parse(raw).unwrap_err().code(), 501);
        assert_eq!(
            parse(b"BAD\x01 / HTTP/1.1\r\n\r\n").unwrap_err().code(),
            400
        );
        let raw = b"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n";
        assert_eq!(parse(raw).unwrap_err().code(), 400);
    }

    #[test]
    fn percent_decoding_and_close() {
        let raw = b"GET /v1/containers/a%2Fb?x=1+2 HTTP/1.0\r\n\r\n";
        let (req, _) = parse(raw).unwrap().unwrap();
        assert_eq!(req.path, "/v1/containers/a/b");
        assert_eq!(req.param("x"), Some("1 2"));
        assert!(req.close, "HTTP/1.0 closes by default");
    }

    #[test]
    fn encodes_responses() {
        let r = response(404, "application/json", b"{}", true);
        let s = String::from_utf8(r).unwrap();
        assert!(s.starts_with("HTTP/1.1 404 Not Found\r\n"));
        assert!(s.contains("Content-Length: 2\r\n"));
        assert!(s.contains("Connection: close\r\n"));
        assert!(s.ends_with("\r\n\r\n{}"));
        assert_eq!(chunk(b"abc"), b"3\r\nabc\r\n");
        assert_eq!(chunk(b""), b"0\r\n\r\n");
    }
}
