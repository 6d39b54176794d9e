//! The API server's own checks, for the fields a speedbench Job sets: names
//! (RFC 1123 labels and subdomains), label keys and values, environment
//! variable names, Secret keys and resource quantities.

use speedbench_credentials::literal_credential;

use crate::KubeError;

/// The largest quantity the API server keeps (2^63-1); the scheduler reads
/// CPU in millicores, so a CPU quantity stays 1,000 times below it.
pub const MAX_QUANTITY: f64 = 9_223_372_036_854_775_807.0;

/// The longest DNS-1123 label (a namespace, a container, a Pod hostname).
pub const DNS_LABEL_MAX: usize = 63;
/// The longest DNS-1123 subdomain (a Secret or PVC name, a label-key prefix).
pub const DNS_SUBDOMAIN_MAX: usize = 253;

fn bad(field: &str, value: &str, reason: impl Into<String>) -> KubeError {
    KubeError::Invalid {
        field: field.to_string(),
        value: shown_value(value),
        reason: reason.into(),
    }
}

/// A refused value as an error may quote it: not at all when it holds
/// something credential-like (`speedbench_credentials::literal_credential`),
/// since an error is printed and logged.
pub fn shown_value(value: &str) -> String {
    match literal_credential(value) {
        Some(_) => "(not shown: it holds what looks like a credential)".into(),
        None => value.to_string(),
    }
}

/// Label keys the API server and the controllers set on Pods themselves
/// and refuse (or overwrite) in a Pod template: `job-name`,
/// `controller-uid` and their `batch.kubernetes.io/` forms,
/// `pod-template-hash` (the ReplicaSet controller's), and any key under the
/// reserved `kubernetes.io/` and `k8s.io/` prefixes.
pub fn reserved_label(key: &str) -> bool {
    let prefix = key.split_once('/').map(|(p, _)| p);
    matches!(key, "job-name" | "controller-uid" | "pod-template-hash")
        || prefix.is_some_and(|p| {
            p == "kubernetes.io"
                || p == "k8s.io"
                || p.ends_with(".kubernetes.io")
                || p.ends_with(".k8s.io")
        })
}

fn is_lower_alnum(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

/// An RFC 1123 label: 1-63 characters of `a-z`, `0-9` and `-`, starting and
/// ending with a letter or digit (namespaces, container and volume names).
pub fn dns_label(field: &str, value: &str) -> Result<(), KubeError> {
    if value.is_empty() {
        return Err(bad(field, value, "must not be empty"));
    }
    if value.len() > DNS_LABEL_MAX {
        return Err(bad(
            field,
            value,
            format!(
                "is {} characters; at most {DNS_LABEL_MAX} are allowed",
                value.len()
            ),
        ));
    }
    let first = value.chars().next().unwrap_or('-');
    let last = value.chars().next_back().unwrap_or('-');
    if !value.chars().all(|c| is_lower_alnum(c) || c == '-') || !is_lower_alnum(first) {
        return Err(bad(
            field,
            value,
            "must be lower-case letters, digits and '-', starting with a letter or digit \
             (RFC 1123 label)",
        ));
    }
    if !is_lower_alnum(last) {
        return Err(bad(
            field,
            value,
            "must end with a letter or digit (RFC 1123 label)",
        ));
    }
    Ok(())
}

/// An RFC 1123 subdomain: at most 253 characters, dot-separated labels of
/// `a-z`, `0-9` and `-` (Secret and PersistentVolumeClaim names).
pub fn dns_subdomain(field: &str, value: &str) -> Result<(), KubeError> {
    if value.is_empty() {
        return Err(bad(field, value, "must not be empty"));
    }
    if value.len() > DNS_SUBDOMAIN_MAX {
        return Err(bad(
            field,
            value,
            format!(
                "is {} characters; at most {DNS_SUBDOMAIN_MAX} are allowed",
                value.len()
            ),
        ));
    }
    let ok = value.split('.').all(|part| {
        !part.is_empty()
            && part.chars().all(|c| is_lower_alnum(c) || c == '-')
            && part.starts_with(is_lower_alnum)
            && part.ends_with(is_lower_alnum)
    });
    if !ok {
        return Err(bad(
            field,
            value,
            "must be lower-case letters, digits, '-' and '.', each dot-separated part \
             starting and ending with a letter or digit (RFC 1123 subdomain)",
        ));
    }
    Ok(())
}

/// The name part of a qualified name or a label value: at most 63
/// characters of letters, digits, `-`, `_` and `.`, starting and ending with
/// a letter or digit.
fn name_part_ok(value: &str) -> bool {
    value.len() <= DNS_LABEL_MAX
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && value.starts_with(|c: char| c.is_ascii_alphanumeric())
        && value.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// A label key (and an extended resource name): `[prefix/]name`, the
/// prefix an RFC 1123 subdomain, the name at most 63 characters of letters,
/// digits, `-`, `_`, `.`, starting and ending with a letter or digit.
pub fn qualified_name(field: &str, value: &str) -> Result<(), KubeError> {
    let (prefix, name) = match value.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, value),
    };
    if let Some(prefix) = prefix {
        dns_subdomain(field, prefix).map_err(|_| {
            bad(
                field,
                value,
                format!("its prefix {prefix:?} must be an RFC 1123 subdomain"),
            )
        })?;
    }
    if name.is_empty() || !name_part_ok(name) {
        return Err(bad(
            field,
            value,
            "the name (after any 'prefix/') must be 1-63 letters, digits, '-', '_' or '.', \
             starting and ending with a letter or digit",
        ));
    }
    Ok(())
}

/// A label value: empty, or at most 63 characters of letters, digits, `-`,
/// `_`, `.`, starting and ending with a letter or digit.
pub fn label_value(field: &str, value: &str) -> Result<(), KubeError> {
    if value.is_empty() || name_part_ok(value) {
        Ok(())
    } else {
        Err(bad(
            field,
            value,
            "a label value must be at most 63 letters, digits, '-', '_' or '.', starting and \
             ending with a letter or digit",
        ))
    }
}

/// An environment variable name, by the rule every API server version
/// accepts: letters, digits, `_`, `-` and `.`, not starting with a digit.
pub fn env_name(field: &str, value: &str) -> Result<(), KubeError> {
    let ok = !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        && !value.starts_with(|c: char| c.is_ascii_digit());
    if ok {
        Ok(())
    } else {
        Err(bad(
            field,
            value,
            "an environment variable name must be letters, digits, '_', '-' or '.', not \
             starting with a digit",
        ))
    }
}

/// A Secret (or ConfigMap) key: 1-253 characters of letters, digits, `-`,
/// `_` and `.`, and not `.` or `..`.
pub fn secret_key(field: &str, value: &str) -> Result<(), KubeError> {
    let ok = !value.is_empty()
        && value.len() <= DNS_SUBDOMAIN_MAX
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && value != "."
        && value != "..";
    if ok {
        Ok(())
    } else {
        Err(bad(
            field,
            value,
            "a Secret key must be 1-253 letters, digits, '-', '_' or '.' (and not '.' or '..')",
        ))
    }
}

/// A resource quantity's value, parsed by the API server's grammar
/// (`<sign><digits>[.<digits>]<suffix>`, the suffix a binary-SI `Ki Mi Gi
/// Ti Pi Ei`, a decimal-SI `m k M G T P E` or none, or an exponent
/// `e<n>`/`E<n>`), as a number for comparing requests with limits.
/// Negative quantities are refused: no resource may be requested below 0.
pub fn quantity(field: &str, value: &str) -> Result<f64, KubeError> {
    let err = |reason: &str| bad(field, value, reason.to_string());
    let grammar = "is not a Kubernetes quantity (a number with an optional suffix: \
                   Ki Mi Gi Ti Pi Ei, m k M G T P E, or an exponent e3)";
    let (negative, rest) = match value.as_bytes().first() {
        Some(b'-') => (true, &value[1..]),
        Some(b'+') => (false, &value[1..]),
        _ => (false, value),
    };
    let number_len = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(number_len);
    let digits: String = number.chars().filter(char::is_ascii_digit).collect();
    if digits.is_empty() || number.matches('.').count() > 1 {
        return Err(err(grammar));
    }
    let base: f64 = number.parse().map_err(|_| err(grammar))?;
    let scale = match suffix {
        "" => 1.0,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        s if s.starts_with(['e', 'E']) => {
            let exp = &s[1..];
            let unsigned = exp.strip_prefix(['+', '-']).unwrap_or(exp);
            if unsigned.is_empty() || !unsigned.chars().all(|c| c.is_ascii_digit()) {
                return Err(err(grammar));
            }
            let exp: i32 = exp.parse().map_err(|_| err(grammar))?;
            10f64.powi(exp)
        }
        _ => return Err(err(grammar)),
    };
    if negative && base != 0.0 {
        return Err(err("must not be negative"));
    }
    let v = base * scale;
    // The API server keeps no quantity past 2^63-1: a larger one is capped
    // without a word, and the Pod would run with another value than given.
    if !v.is_finite() || v > MAX_QUANTITY {
        return Err(err(
            "is too large: the API server caps every quantity at 2^63-1 (9.2e18) and would \
             silently change it",
        ));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_labels_are_recognised() {
        for key in [
            "job-name",
            "controller-uid",
            "pod-template-hash",
            "batch.kubernetes.io/job-name",
            "kubernetes.io/x",
            "k8s.io/y",
        ] {
            assert!(reserved_label(key), "{key}");
        }
        for key in ["team", "example.com/tier", "app", "template-hash"] {
            assert!(!reserved_label(key), "{key}");
        }
    }

    #[test]
    fn a_refused_value_is_quoted_unless_it_looks_like_a_credential() {
        let e = dns_label("name", "Bad_Name").unwrap_err().to_string();
        assert!(e.contains("Bad_Name"), "{e}");
        let e = dns_label("name", "sk-ABCDEFGHIJKLMNOPQRSTUV")
            .unwrap_err()
            .to_string();
        assert!(!e.contains("sk-ABC") && e.contains("not shown"), "{e}");
    }

    #[test]
    fn labels_and_subdomains() {
        for ok in ["a", "job-1", "0abc", &"a".repeat(63)] {
            dns_label("f", ok).unwrap();
        }
        for no in ["", "A", "-a", "a-", "a_b", "a.b", &"a".repeat(64)] {
            assert!(dns_label("f", no).is_err(), "{no:?} accepted");
        }
        for ok in ["a.b", "my-secret", "x.y-z.0"] {
            dns_subdomain("f", ok).unwrap();
        }
        for no in ["", "a..b", ".a", "a.", "A.b", "a_b", &"a".repeat(254)] {
            assert!(dns_subdomain("f", no).is_err(), "{no:?} accepted");
        }
    }

    #[test]
    fn qualified_names_and_label_values() {
        for ok in ["app", "app.kubernetes.io/name", "nvidia.com/gpu", "A_b.c"] {
            qualified_name("f", ok).unwrap();
        }
        for no in [
            "",
            "/a",
            "a/",
            "Bad_Prefix/a",
            "a/b/c",
            "-a",
            &"a".repeat(64),
        ] {
            assert!(qualified_name("f", no).is_err(), "{no:?} accepted");
        }
        for ok in ["", "v1", "A-b_c.d"] {
            label_value("f", ok).unwrap();
        }
        for no in ["-a", "a-", "a b", "a/b", &"a".repeat(64)] {
            assert!(label_value("f", no).is_err(), "{no:?} accepted");
        }
    }

    #[test]
    fn env_names_and_secret_keys() {
        for ok in ["HF_TOKEN", "a.b-c", "_X"] {
            env_name("f", ok).unwrap();
        }
        for no in ["", "1ABC", "A=B", "A B", "A$"] {
            assert!(env_name("f", no).is_err(), "{no:?} accepted");
        }
        for ok in ["token", "api-key.txt", "A_B"] {
            secret_key("f", ok).unwrap();
        }
        for no in ["", ".", "..", "a/b", "a b"] {
            assert!(secret_key("f", no).is_err(), "{no:?} accepted");
        }
    }

    #[test]
    fn quantities_parse_as_the_api_server_reads_them() {
        let cases = [
            ("1", 1.0),
            ("500m", 0.5),
            ("0.5", 0.5),
            ("1.5Gi", 1.5 * 1024f64.powi(3)),
            ("128Mi", 128.0 * 1024f64.powi(2)),
            ("2k", 2000.0),
            ("1e3", 1000.0),
            ("1E-3", 0.001),
            ("+4", 4.0),
            (".5", 0.5),
            ("5.", 5.0),
            ("0", 0.0),
        ];
        for (text, want) in cases {
            let got = quantity("f", text).unwrap();
            assert!(
                (got - want).abs() <= want * 1e-12,
                "{text}: {got} != {want}"
            );
        }
        for no in [
            "",
            "Gi",
            "1.2.3",
            "1 Gi",
            "1gi",
            "1GB",
            "-1",
            "1e",
            "1e+",
            "1ee3",
            ".",
            "1Ki2",
            "1e400",
            "99999999999999999999",
            "9Ei",
            "10E",
            "1e19",
        ] {
            assert!(quantity("f", no).is_err(), "{no:?} accepted");
        }
    }
}
