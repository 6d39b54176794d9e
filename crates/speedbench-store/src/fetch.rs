//! Fetching runs back from a store, for `report` and `compare`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures_util::StreamExt;
use object_store::{ObjectStore, ObjectStoreExt};
use tokio::io::AsyncWriteExt;

use crate::upload::request_error;
use crate::{StoreError, StoreUrl};

/// What [`fetch`] brought down.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Fetched {
    /// The local copy: a directory named as the URL's last segment (so a
    /// run keeps its directory name as its label), or the one file when
    /// the URL names a single object (a speed_bench.py `.json`).
    pub root: PathBuf,
    /// Objects fetched.
    pub objects: usize,
    /// Their bytes.
    pub bytes: u64,
}

/// Copies every object under `url` into `dest`, keeping the layout below
/// the prefix (a parent of several runs, or of a sharded run's shards,
/// comes down whole). A URL naming one object fetches that object.
pub async fn fetch(
    store: &Arc<dyn ObjectStore>,
    url: &StoreUrl,
    dest: &Path,
) -> Result<Fetched, StoreError> {
    let root = dest.join(url.last_segment());
    let mut listing = store.list(Some(url.prefix()));
    let mut objects = 0;
    let mut bytes = 0;
    while let Some(meta) = listing.next().await {
        let meta = meta.map_err(|e| request_error(url, "listing", e))?;
        let Some(parts) = meta.location.prefix_match(url.prefix()) else {
            continue;
        };
        let mut path = root.clone();
        for part in parts {
            path.push(part.as_ref());
        }
        bytes += download(store, &url.of_object(&meta.location), &path).await?;
        objects += 1;
    }
    if objects > 0 {
        return Ok(Fetched {
            root,
            objects,
            bytes,
        });
    }
    match store.head(url.prefix()).await {
        Ok(_) => {
            let path = dest.join(url.last_segment());
            let bytes = download(store, url, &path).await?;
            Ok(Fetched {
                root: path,
                objects: 1,
                bytes,
            })
        }
        Err(object_store::Error::NotFound { .. }) => Err(StoreError::Empty {
            url: url.to_string(),
        }),
        Err(e) => Err(request_error(url, "looking up", e)),
    }
}

/// Streams one object into `path`; its size.
async fn download(
    store: &Arc<dyn ObjectStore>,
    url: &StoreUrl,
    path: &Path,
) -> Result<u64, StoreError> {
    if let Some(parent) = path.parent() {
        tokio::fs::create_dir_all(parent)
            .await
            .map_err(StoreError::io(parent))?;
    }
    let got = store
        .get(url.prefix())
        .await
        .map_err(|e| request_error(url, "downloading", e))?;
    let mut file = tokio::fs::File::create(path)
        .await
        .map_err(StoreError::io(path))?;
    let mut stream = got.into_stream();
    let mut len = 0;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| request_error(url, "downloading", e))?;
        file.write_all(&chunk).await.map_err(StoreError::io(path))?;
        len += chunk.len() as u64;
    }
    file.flush().await.map_err(StoreError::io(path))?;
    Ok(len)
}
