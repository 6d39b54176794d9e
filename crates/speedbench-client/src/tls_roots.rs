//! Which clients read TLS roots: only those of `https://` URLs. A client
//! of plain-HTTP URLs never handshakes, and `SSL_CERT_FILE`'s bundle
//! parsed for nothing was a third of a short run's start-up.

use speedbench_http::ClientOptions;

/// Whether `url` is an `https://` URL (the scheme in any case).
pub(crate) fn is_https(url: &str) -> bool {
    url.get(..8)
        .is_some_and(|s| s.eq_ignore_ascii_case("https://"))
}

/// `options` trusting `extra_roots_pem` and `SSL_CERT_FILE`'s bundle
/// where `tls` (a client of `https://` URLs); none where not.
pub(crate) fn with_roots(
    options: ClientOptions,
    extra_roots_pem: &[Vec<u8>],
    tls: bool,
) -> ClientOptions {
    ClientOptions {
        extra_roots_pem: if tls {
            extra_roots_pem.to_vec()
        } else {
            Vec::new()
        },
        use_ssl_cert_file: tls,
        ..options
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_https_urls_need_tls_roots() {
        for (url, https) in [
            ("https://h:1/v1", true),
            ("HTTPS://h", true),
            ("http://127.0.0.1:8000", false),
            ("https:/h", false),
            ("", false),
        ] {
            assert_eq!(is_https(url), https, "{url}");
        }
        let roots = [b"pem".to_vec()];
        let plain = with_roots(ClientOptions::default(), &roots, false);
        assert!(plain.extra_roots_pem.is_empty() && !plain.use_ssl_cert_file);
        let tls = with_roots(ClientOptions::default(), &roots, true);
        assert_eq!(
            (tls.extra_roots_pem.len(), tls.use_ssl_cert_file),
            (1, true)
        );
    }
}
