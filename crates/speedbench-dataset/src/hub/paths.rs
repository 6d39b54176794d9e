//! Names and paths on the Hub and in its cache: URL encoding, commits,
//! split file layouts, cache folders, `Link` pagination.

/// Percent-encodes everything but unreserved characters (and `/` if asked).
pub fn percent_encode(s: &str, keep_slash: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric()
            || matches!(b, b'-' | b'.' | b'_' | b'~')
            || (keep_slash && b == b'/')
        {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

pub(super) fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// True for a full 40-hex commit sha.
pub fn is_commit(revision: &str) -> bool {
    is_hex(revision, 40)
}

/// Picks the Parquet files of `config`/`split` from a repository's paths.
///
/// Understands the layouts the Hub uses: `{config}/{split}-NNNNN-of-NNNNN.parquet`,
/// `data/{split}-*.parquet` (the `default` config), and the Parquet
/// conversion branch's `{config}/{split}/NNNN.parquet` and
/// `{config}/partial-{split}/NNNN.parquet`.
pub fn select_split_files<'a>(
    paths: impl IntoIterator<Item = &'a str>,
    config: &str,
    split: &str,
) -> Vec<String> {
    let partial = format!("partial-{split}");
    let mut out: Vec<String> = paths
        .into_iter()
        .filter(|p| p.ends_with(".parquet"))
        .filter(|p| {
            let comps: Vec<&str> = p.split('/').collect();
            let (file, dirs) = comps.split_last().expect("split yields one item");
            let config_ok = dirs.contains(&config) || config == "default";
            let split_ok = dirs.last() == Some(&split)
                || dirs.last() == Some(&partial.as_str())
                || *file == format!("{split}.parquet")
                || file.starts_with(&format!("{split}-"))
                || file.starts_with(&format!("{split}_"));
            config_ok && split_ok
        })
        .map(String::from)
        .collect();
    out.sort();
    out
}

/// The cache folder name of a dataset repository: `datasets--org--name`.
pub fn repo_folder(repo: &str) -> String {
    format!("datasets--{}", repo.replace('/', "--"))
}

/// The `rel="next"` URL of a `Link` header.
pub(super) fn next_link(link: &str) -> Option<String> {
    link.split(',').find_map(|part| {
        let (url, params) = part.split_once(';')?;
        params.contains("rel=\"next\"").then(|| {
            url.trim()
                .trim_start_matches('<')
                .trim_end_matches('>')
                .to_string()
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_files_follow_the_hub_layouts() {
        let paths = [
            "README.md",
            "qualitative/test-00000-of-00001.parquet",
            "throughput_16k/test-00000-of-00001.parquet",
            "throughput_1k/test-00000-of-00002.parquet",
            "throughput_1k/test-00001-of-00002.parquet",
            "main/test/0000.parquet",
            "main/train/0000.parquet",
            "data/test-00000-of-00001.parquet",
        ];
        let p = paths.iter().copied();
        assert_eq!(
            select_split_files(p.clone(), "throughput_1k", "test"),
            vec![
                "throughput_1k/test-00000-of-00002.parquet",
                "throughput_1k/test-00001-of-00002.parquet"
            ]
        );
        assert_eq!(
            select_split_files(p.clone(), "main", "test"),
            vec!["main/test/0000.parquet"]
        );
        assert!(
            select_split_files(p.clone(), "default", "test")
                .contains(&"data/test-00000-of-00001.parquet".to_string())
        );
        assert!(select_split_files(p, "nope", "test").is_empty());
    }

    #[test]
    fn encoding_links_and_folders() {
        assert_eq!(
            percent_encode("refs/convert/parquet", false),
            "refs%2Fconvert%2Fparquet"
        );
        assert_eq!(percent_encode("a b/c.parquet", true), "a%20b/c.parquet");
        assert_eq!(
            repo_folder("nvidia/SPEED-Bench"),
            "datasets--nvidia--SPEED-Bench"
        );
        assert_eq!(
            next_link("<http://h/api?cursor=2>; rel=\"next\""),
            Some("http://h/api?cursor=2".into())
        );
        assert_eq!(next_link("<http://h/a>; rel=\"prev\""), None);
    }
}
