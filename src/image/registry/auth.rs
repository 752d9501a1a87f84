//! Registry auth: the `WWW-Authenticate` challenge of a 401 (RFC 7235, as the distribution
//! spec's token flow uses it), the token server's answer, and base64 for Basic
//! credentials and docker configs.

/// One challenge of a `WWW-Authenticate` header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Challenge {
    /// Lowercased: `bearer`, `basic`.
    pub scheme: String,
    /// Parameter names lowercased.
    pub params: Vec<(String, String)>,
}

impl Challenge {
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Every challenge in the headers, in order.
pub fn parse_challenges<'a>(headers: impl Iterator<Item = &'a str>) -> Vec<Challenge> {
    let mut out: Vec<Challenge> = Vec::new();
    for h in headers {
        let mut p = Parser {
            s: h.as_bytes(),
            i: 0,
        };
        loop {
            p.skip(b" \t,");
            let Some(word) = p.token() else { break };
            p.skip(b" \t");
            if p.peek() == Some(b'=') {
                // A parameter of the challenge being read.
                p.i += 1;
                p.skip(b" \t");
                let value = p.value();
                if let Some(c) = out.last_mut() {
                    c.params.push((word.to_ascii_lowercase(), value));
                }
            } else {
                out.push(Challenge {
                    scheme: word.to_ascii_lowercase(),
                    params: Vec::new(),
                });
            }
        }
    }
    out
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn skip(&mut self, set: &[u8]) {
        while self.peek().is_some_and(|c| set.contains(&c)) {
            self.i += 1;
        }
    }

    fn token(&mut self) -> Option<String> {
        let start = self.i;
        while self
            .peek()
            .is_some_and(|c| !b" \t,=\"".contains(&c) && !c.is_ascii_control())
        {
            self.i += 1;
        }
        if self.i == start {
            // Nothing recognisable: stop rather than loop.
            self.i = self.s.len();
            return None;
        }
        Some(String::from_utf8_lossy(&self.s[start..self.i]).into_owned())
    }

    fn value(&mut self) -> String {
        if self.peek() != Some(b'"') {
            return self.token().unwrap_or_default();
        }
        self.i += 1;
        let mut v = Vec::new();
        while let Some(c) = self.peek() {
            self.i += 1;
            match c {
                b'"' => break,
                b'\\' => {
                    if let Some(n) = self.peek() {
                        v.push(n);
                        self.i += 1;
                    }
                }
                _ => v.push(c),
            }
        }
        String::from_utf8_lossy(&v).into_owned()
    }
}

/// Why a token server's answer gives no token.
#[derive(Debug)]
pub enum BadToken {
    Json(serde_json::Error),
    Missing,
}

impl std::fmt::Display for BadToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BadToken::Json(e) => write!(f, "token server's answer: {e}"),
            BadToken::Missing => f.write_str("token server's answer has no token"),
        }
    }
}

/// The token in a token server's JSON answer (`token`, or OAuth's `access_token`).
pub fn token_from_answer(body: &[u8]) -> Result<String, BadToken> {
    #[derive(serde::Deserialize)]
    struct Answer {
        #[serde(default)]
        token: String,
        #[serde(default)]
        access_token: String,
    }
    let a: Answer = serde_json::from_slice(body).map_err(BadToken::Json)?;
    [a.token, a.access_token]
        .into_iter()
        .find(|t| !t.is_empty())
        .ok_or(BadToken::Missing)
}

/// `Basic` credentials for an `Authorization` header.
pub fn basic(username: &str, password: &str) -> String {
    format!(
        "Basic {}",
        base64_encode(format!("{username}:{password}").as_bytes())
    )
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

pub fn base64_encode(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for c in data.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for k in 0..4 {
            if k <= c.len() {
                out.push(B64[(n >> (18 - 6 * k)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Why a text is not base64.
#[derive(Debug, PartialEq, Eq)]
pub enum BadBase64 {
    Character(char),
    Truncated,
}

impl std::fmt::Display for BadBase64 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BadBase64::Character(c) => write!(f, "invalid base64 character {c:?}"),
            BadBase64::Truncated => f.write_str("truncated base64"),
        }
    }
}

/// Standard base64, padding optional (docker configs are written by many tools).
pub fn base64_decode(s: &str) -> Result<Vec<u8>, BadBase64> {
    let s = s.trim().trim_end_matches('=');
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let mut acc = 0u32;
    let mut bits = 0;
    for c in s.bytes() {
        let v = B64
            .iter()
            .position(|&b| b == c)
            .ok_or(BadBase64::Character(c as char))?;
        acc = (acc << 6) | v as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    if bits >= 6 {
        return Err(BadBase64::Truncated);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_bearer_and_basic_challenges() {
        let h = r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/nginx:pull""#;
        let c = parse_challenges([h].into_iter());
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].scheme, "bearer");
        assert_eq!(c[0].param("realm"), Some("https://auth.docker.io/token"));
        assert_eq!(c[0].param("service"), Some("registry.docker.io"));
        assert_eq!(c[0].param("scope"), Some("repository:library/nginx:pull"));
        let c = parse_challenges(
            [
                r#"Basic realm="a \"q\", b""#,
                "Bearer realm=x, error=insufficient_scope",
            ]
            .into_iter(),
        );
        assert_eq!(c[0].scheme, "basic");
        assert_eq!(c[0].param("realm"), Some(r#"a "q", b"#));
        assert_eq!(c[1].param("realm"), Some("x"));
        assert_eq!(c[1].param("error"), Some("insufficient_scope"));
        assert!(parse_challenges(["=,\"junk"].into_iter()).is_empty());
    }

    #[test]
    fn reads_tokens() {
        assert_eq!(token_from_answer(br#"{"token":"t1"}"#).unwrap(), "t1");
        assert_eq!(
            token_from_answer(br#"{"access_token":"t2","expires_in":60}"#).unwrap(),
            "t2"
        );
        let e = token_from_answer(b"{}").unwrap_err();
        assert_eq!(e.to_string(), "token server's answer has no token");
        assert!(token_from_answer(b"<html>").is_err());
    }

    #[test]
    fn base64_round_trips() {
        for s in [
            "",
            "f",
            "fo",
            "foo",
            "foob",
            "fooba",
            "foobar",
            "user:pässword",
        ] {
            let e = base64_encode(s.as_bytes());
            assert_eq!(base64_decode(&e).unwrap(), s.as_bytes(), "{e}");
        }
        assert_eq!(base64_encode(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64_encode(b"fo"), "Zm8=");
        assert_eq!(base64_decode("Zm8").unwrap(), b"fo");
        assert_eq!(base64_decode("Z"), Err(BadBase64::Truncated));
        assert_eq!(base64_decode("Zm9v!"), Err(BadBase64::Character('!')));
        assert_eq!(basic("u", "p"), "Basic dTpw");
    }
}
