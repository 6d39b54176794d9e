//! The store's types, a leaf both the errors and the staging read: the
//! object-store crate's with the `store` feature, empty types without it
//! (no value of them exists: no store URL is accepted).

#[cfg(feature = "store")]
pub use speedbench_store::{StoreError, StoreUrl, UploadReport};

#[cfg(not(feature = "store"))]
pub use absent::{StoreError, StoreUrl, UploadReport};

#[cfg(not(feature = "store"))]
mod absent {
    use std::fmt;

    /// A store URL; none exists in a build without the `store` feature.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub enum StoreUrl {}

    impl fmt::Display for StoreUrl {
        fn fmt(&self, _: &mut fmt::Formatter<'_>) -> fmt::Result {
            match *self {}
        }
    }

    /// A store's error; none exists in a build without the `store` feature.
    #[derive(Debug)]
    pub enum StoreError {}

    impl fmt::Display for StoreError {
        fn fmt(&self, _: &mut fmt::Formatter<'_>) -> fmt::Result {
            match *self {}
        }
    }

    impl std::error::Error for StoreError {}

    /// An upload's account; none exists in a build without the `store` feature.
    #[derive(Debug)]
    pub enum UploadReport {}
}
