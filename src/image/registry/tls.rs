//! The TLS settings of a pull: rustls verifying the registry's certificate against the
//! system's roots and the `--registry-ca` files (unlike probes, which kubelet does not
//! verify).

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::{ClientConfig, RootCertStore};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::image::Error;

/// Debian's bundle of the system's roots (`ca-certificates`); `$SSL_CERT_FILE` replaces it
/// as it does for OpenSSL and Go.
const SYSTEM_ROOTS: &str = "/etc/ssl/certs/ca-certificates.crt";

pub fn config(ca_files: &[PathBuf]) -> Result<Arc<ClientConfig>, Error> {
    let mut roots = RootCertStore::empty();
    let system = std::env::var_os("SSL_CERT_FILE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(SYSTEM_ROOTS));
    // A machine without the bundle can still reach registries whose CA is given.
    if system.exists() {
        roots.add_parsable_certificates(read_certs(&system)?);
    }
    for f in ca_files {
        let certs = read_certs(f)?;
        if certs.is_empty() {
            return Err(Error::Content(format!(
                "--registry-ca {}: no PEM certificate in it",
                f.display()
            )));
        }
        for c in certs {
            roots
                .add(c)
                .map_err(|e| Error::Content(format!("--registry-ca {}: {e}", f.display())))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let c = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Content(format!("tls: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(c))
}

fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, Error> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path.display(), e))?;
    CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            Error::Content(format!(
                "{}: not a PEM certificate file: {e}",
                path.display()
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_file_without_certificates_is_refused() {
        let dir = std::env::temp_dir().join(format!("podinit-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("empty.pem");
        std::fs::write(&f, "not a certificate\n").unwrap();
        let e = config(std::slice::from_ref(&f)).unwrap_err().to_string();
        assert!(
            e.contains("no PEM certificate") && e.contains("empty.pem"),
            "{e}"
        );
        let e = config(&[dir.join("missing.pem")]).unwrap_err();
        assert_eq!(e.kind(), crate::error::Kind::NotFound);
        assert!(e.to_string().contains("missing.pem"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
