//! The TLS configuration every client shares: Mozilla's roots, the
//! system's, `SSL_CERT_FILE`'s and the caller's extra roots, with the two
//! large stores read only when a first certificate is checked.
//!
//! Reading the system store (a few hundred PEM files, base64) was a third
//! of the CPU of a one-request run over plain HTTP, which never uses it:
//! the connector is built for `https://` and `http://` alike, so the
//! verifier defers the store until a TLS handshake asks for it. What the
//! user gives (`SSL_CERT_FILE`, extra PEM roots) is still read and checked
//! when the client is built, so a bad bundle is an error before any
//! request.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

use crate::{ClientOptions, HttpError};

fn add_pem(roots: &mut RootCertStore, pem: &[u8], origin: &str) -> Result<(), HttpError> {
    let bad = |message: String| HttpError::CaBundle {
        path: PathBuf::from(origin),
        message,
    };
    let mut added = 0;
    for cert in CertificateDer::pem_slice_iter(pem) {
        let cert = cert.map_err(|e| bad(e.to_string()))?;
        roots.add(cert).map_err(|e| bad(e.to_string()))?;
        added += 1;
    }
    if added == 0 {
        return Err(bad("no PEM certificate found".into()));
    }
    Ok(())
}

/// Mozilla's roots and the system's, read once per process, on the first
/// certificate checked: one run builds several clients (the load's, the
/// control plane's, the metrics scraper's), https or not.
fn base_roots() -> &'static RootCertStore {
    static ROOTS: OnceLock<RootCertStore> = OnceLock::new();
    ROOTS.get_or_init(|| {
        let mut roots = RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        for cert in rustls_native_certs::load_native_certs().certs {
            // A malformed system certificate must not stop every HTTPS request.
            let _ = roots.add(cert);
        }
        roots
    })
}

/// WebPKI's verifier over [`base_roots`] and the client's own roots, built
/// on the first certificate it checks. Signatures are checked by the
/// provider's algorithms, as WebPKI's verifier does, without the roots.
#[derive(Debug)]
struct DeferredRootsVerifier {
    provider: Arc<CryptoProvider>,
    /// The roots the user gave, already parsed and checked.
    own: RootCertStore,
    verifier: OnceLock<Result<Arc<WebPkiServerVerifier>, String>>,
}

impl DeferredRootsVerifier {
    fn verifier(&self) -> Result<&Arc<WebPkiServerVerifier>, rustls::Error> {
        self.verifier
            .get_or_init(|| {
                let mut roots = base_roots().clone();
                roots.roots.extend(self.own.roots.iter().cloned());
                WebPkiServerVerifier::builder_with_provider(Arc::new(roots), self.provider.clone())
                    .build()
                    .map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|e| rustls::Error::General(format!("no certificate verifier: {e}")))
    }
}

impl ServerCertVerifier for DeferredRootsVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.verifier()?.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        )
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The roots of the `SSL_CERT_FILE` bundle at `path`, read and parsed once
/// per process (a run builds several clients; a system bundle of ~150
/// certificates costs a parse of its base64 each time): a later call with
/// another path reads that one.
fn ssl_cert_file_roots(path: PathBuf) -> Result<RootCertStore, HttpError> {
    static PARSED: OnceLock<(PathBuf, RootCertStore)> = OnceLock::new();
    if let Some((parsed, roots)) = PARSED.get()
        && *parsed == path
    {
        return Ok(roots.clone());
    }
    let pem = std::fs::read(&path).map_err(|e| HttpError::CaBundle {
        path: path.clone(),
        message: e.to_string(),
    })?;
    let mut roots = RootCertStore::empty();
    add_pem(&mut roots, &pem, &path.display().to_string())?;
    let _ = PARSED.set((path, roots.clone()));
    Ok(roots)
}

/// The TLS configuration: Mozilla roots, system roots (both read on the
/// first handshake), then the roots of `SSL_CERT_FILE` and the options'
/// extra roots (read now: a bad bundle is an error here).
pub(crate) fn tls_config(options: &ClientOptions) -> Result<rustls::ClientConfig, HttpError> {
    let mut own = RootCertStore::empty();
    if options.use_ssl_cert_file
        && let Some(path) = std::env::var_os("SSL_CERT_FILE")
    {
        own = ssl_cert_file_roots(PathBuf::from(path))?;
    }
    for (i, pem) in options.extra_roots_pem.iter().enumerate() {
        add_pem(&mut own, pem, &format!("<extra root {i}>"))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = DeferredRootsVerifier {
        provider: provider.clone(),
        own,
        verifier: OnceLock::new(),
    };
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| HttpError::CaBundle {
            path: PathBuf::new(),
            message: e.to_string(),
        })?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_users_roots_are_checked_when_the_client_is_built() {
        let options = ClientOptions {
            use_ssl_cert_file: false,
            ..ClientOptions::default()
        };
        tls_config(&options).unwrap();
        let bad = ClientOptions {
            use_ssl_cert_file: false,
            extra_roots_pem: vec![b"not a certificate".to_vec()],
            ..ClientOptions::default()
        };
        let err = tls_config(&bad).unwrap_err().to_string();
        assert!(err.contains("extra root 0"), "{err}");
    }

    #[test]
    fn a_bad_ssl_cert_file_is_named_every_time() {
        let dir = std::env::temp_dir().join(format!("sb-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let missing = dir.join("missing.pem");
        let err = ssl_cert_file_roots(missing.clone())
            .unwrap_err()
            .to_string();
        assert!(err.contains("missing.pem"), "{err}");
        let garbage = dir.join("garbage.pem");
        std::fs::write(&garbage, "no certificates here").unwrap();
        for _ in 0..2 {
            let err = ssl_cert_file_roots(garbage.clone())
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("garbage.pem") && err.contains("no PEM"),
                "{err}"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
