//! Kubernetes' names: RFC 1123 labels and subdomains, with the API server's messages.

use super::{err, R};

/// Kubernetes' regular expression for a label, `[a-z0-9]([-a-z0-9]*[a-z0-9])?`. Its
/// length limit is a check of its own (a subdomain's labels have none but the whole's).
fn dns1123_label_chars(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// `field` must be an RFC 1123 label; Kubernetes' first message when it is not.
pub fn dns1123_label(field: impl Into<String>, v: &str) -> R {
    if v.len() > 63 {
        return err(
            field,
            format!("Invalid value: {v:?}: must be no more than 63 characters"),
        );
    }
    if !dns1123_label_chars(v) {
        return err(field, format!("Invalid value: {v:?}: {LABEL_MSG}"));
    }
    Ok(())
}

/// `field` must be an RFC 1123 subdomain; Kubernetes' first message when it is not.
pub fn dns1123_subdomain(field: impl Into<String>, v: &str) -> R {
    if v.len() > 253 {
        return err(
            field,
            format!("Invalid value: {v:?}: must be no more than 253 characters"),
        );
    }
    if !v.split('.').all(dns1123_label_chars) {
        return err(field, format!("Invalid value: {v:?}: {SUBDOMAIN_MSG}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_subdomains() {
        assert!(dns1123_label("f", "web-1").is_ok());
        for bad in ["Web", "-web", "web-", "a.b", ""] {
            let e = dns1123_label("f", bad).unwrap_err();
            assert!(e.message.contains("RFC 1123 label"), "{bad:?}: {e}");
        }
        let e = dns1123_label("f", &"a".repeat(64)).unwrap_err();
        assert!(e.message.ends_with("must be no more than 63 characters"));
        assert!(dns1123_subdomain("f", "a.b-c.d").is_ok());
        for bad in ["a..b", ".a", "A.b"] {
            let e = dns1123_subdomain("f", bad).unwrap_err();
            assert!(e.message.contains("RFC 1123 subdomain"), "{bad:?}: {e}");
        }
        let long = format!("{}.{}", "a".repeat(63), "b".repeat(190));
        assert!(dns1123_subdomain("f", &long).is_err());
    }
}
