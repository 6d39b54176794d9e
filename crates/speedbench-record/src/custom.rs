//! Caller-defined columns: values a downstream benchmark adds to each record
//! (a GPU power sample, a router's replica id, a prompt's difficulty) that
//! travel with it through the records file, its readers and its rewrites.
//!
//! A custom column has a name starting with [`CUSTOM_COLUMN_PREFIX`] (`x_`;
//! speedbench never gives one of its own columns such a name, so a new
//! release cannot collide with yours) and one of four [`CustomKind`]s. Declare
//! the columns when creating the writer
//! ([`RecordWriter::create_with_columns`](crate::RecordWriter::create_with_columns)),
//! put the values in [`RequestRecord::custom`](crate::RequestRecord::custom);
//! a record may leave any of them out (stored as null). Readers give every
//! `x_` column of a file back, whatever width the tool that rewrote it chose
//! (pandas' int32 or float64, polars' large strings, dictionaries), and list
//! them in [`RecordsFile::custom_columns`](crate::RecordsFile::custom_columns)
//! so a rewrite can declare them again.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::RecordError;

/// The prefix every custom column's name starts with.
pub const CUSTOM_COLUMN_PREFIX: &str = "x_";

/// The type of a custom column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CustomKind {
    /// Signed 64-bit integers (files: any integer width that fits).
    Int64,
    /// 64-bit floats (files: any float width).
    Float64,
    /// UTF-8 text (files: any string width, or UTF-8 binary).
    Utf8,
    /// Booleans.
    Boolean,
}

impl fmt::Display for CustomKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CustomKind::Int64 => "int64",
            CustomKind::Float64 => "float64",
            CustomKind::Utf8 => "utf8",
            CustomKind::Boolean => "boolean",
        })
    }
}

/// One value of a custom column.
///
/// In JSON it is the plain value (`3`, `2.5`, `"a"`, `true`); a whole number
/// reads back as [`CustomValue::Int64`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum CustomValue {
    /// For a [`CustomKind::Int64`] column.
    Int64(i64),
    /// For a [`CustomKind::Float64`] column.
    Float64(f64),
    /// For a [`CustomKind::Utf8`] column.
    Utf8(String),
    /// For a [`CustomKind::Boolean`] column.
    Boolean(bool),
}

impl CustomValue {
    /// The kind of column this value belongs in.
    pub fn kind(&self) -> CustomKind {
        match self {
            CustomValue::Int64(_) => CustomKind::Int64,
            CustomValue::Float64(_) => CustomKind::Float64,
            CustomValue::Utf8(_) => CustomKind::Utf8,
            CustomValue::Boolean(_) => CustomKind::Boolean,
        }
    }
}

/// A declared custom column: its name (starting with `x_`) and kind.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CustomColumn {
    name: String,
    kind: CustomKind,
}

impl CustomColumn {
    /// Declares a column; the name must start with [`CUSTOM_COLUMN_PREFIX`],
    /// have something after it, and hold only ASCII letters, digits and `_`
    /// (so every tool can name it without quoting).
    pub fn new(name: impl Into<String>, kind: CustomKind) -> Result<CustomColumn, RecordError> {
        let name = name.into();
        let rest = name.strip_prefix(CUSTOM_COLUMN_PREFIX).unwrap_or("");
        if rest.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(RecordError::CustomColumn {
                column: name,
                message: format!(
                    "a custom column's name is {CUSTOM_COLUMN_PREFIX} followed by ASCII letters, \
                     digits and _ (speedbench's own columns never start with {CUSTOM_COLUMN_PREFIX})"
                ),
            });
        }
        Ok(CustomColumn { name, kind })
    }

    /// A column as a file names it (read back, the name is not checked:
    /// a file another tool rewrote may name it more freely).
    #[cfg_attr(not(feature = "parquet"), allow(dead_code))]
    pub(crate) fn read(name: &str, kind: CustomKind) -> CustomColumn {
        CustomColumn {
            name: name.to_string(),
            kind,
        }
    }

    /// The column's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The column's kind.
    pub fn kind(&self) -> CustomKind {
        self.kind
    }
}

/// Checks that `columns` hold no name twice.
#[cfg_attr(not(feature = "parquet"), allow(dead_code))]
pub(crate) fn check_unique(columns: &[CustomColumn]) -> Result<(), RecordError> {
    for (i, c) in columns.iter().enumerate() {
        if columns[..i].iter().any(|d| d.name == c.name) {
            return Err(RecordError::CustomColumn {
                column: c.name.clone(),
                message: "declared twice".into(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_need_the_prefix_and_plain_characters() {
        assert!(CustomColumn::new("x_gpu_power_w", CustomKind::Float64).is_ok());
        for bad in ["gpu", "x_", "x_a b", "x_é", "ttft_ns", ""] {
            let err = CustomColumn::new(bad, CustomKind::Int64)
                .unwrap_err()
                .to_string();
            assert!(
                err.contains(&format!("{bad:?}")) && err.contains("x_"),
                "{err}"
            );
        }
        let a = CustomColumn::new("x_a", CustomKind::Int64).unwrap();
        let err = check_unique(&[a.clone(), a]).unwrap_err().to_string();
        assert!(err.contains("declared twice"), "{err}");
    }

    #[test]
    fn values_are_plain_json() {
        let values = vec![
            CustomValue::Int64(3),
            CustomValue::Float64(2.5),
            CustomValue::Utf8("a".into()),
            CustomValue::Boolean(true),
        ];
        let json = serde_json::to_string(&values).unwrap();
        assert_eq!(json, r#"[3,2.5,"a",true]"#);
        let back: Vec<CustomValue> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, values);
        assert_eq!(
            back.iter()
                .map(|v| v.kind().to_string())
                .collect::<Vec<_>>(),
            ["int64", "float64", "utf8", "boolean"]
        );
    }
}
