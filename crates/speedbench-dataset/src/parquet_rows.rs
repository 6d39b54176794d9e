//! Reading Hub Parquet files into JSON rows.
//!
//! Hub datasets are small enough per split that a row-as-JSON-object view
//! is the simplest faithful one: every loader and resolver then picks fields
//! by name, and errors name the file and the column.

use std::path::Path;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type, UInt16Type,
    UInt32Type, UInt64Type,
};
use arrow_array::{Array, RecordBatch};
use arrow_schema::DataType;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde_json::{Map, Value};

use crate::DatasetError;
use crate::error::{BoxedCause, ContentError};

/// One row: column name to value.
pub type JsonRow = Map<String, Value>;

/// Reads every row of a Parquet file.
///
/// Strings, integers, floats, booleans, lists and structs map to their JSON
/// counterparts; other types (binary, images, timestamps) become `null`.
/// Snappy and uncompressed files are supported.
pub fn read_parquet_rows(path: &Path) -> Result<Vec<JsonRow>, DatasetError> {
    let bad = |what: &str, e: BoxedCause| {
        DatasetError::from(ContentError::Parquet {
            path: path.to_path_buf(),
            message: format!("{what}{e}"),
            source: Some(e),
        })
    };
    let file = std::fs::File::open(path).map_err(|source| DatasetError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .map_err(|e| bad("not a readable Parquet file: ", Box::new(e)))?
        .with_batch_size(4096)
        .build()
        .map_err(|e| bad("", Box::new(e)))?;
    let mut rows = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|e| bad("reading a row group: ", Box::new(e)))?;
        batch_rows(&batch, &mut rows);
    }
    Ok(rows)
}

fn batch_rows(batch: &RecordBatch, out: &mut Vec<JsonRow>) {
    let schema = batch.schema();
    for i in 0..batch.num_rows() {
        let mut row = Map::new();
        for (field, col) in schema.fields().iter().zip(batch.columns()) {
            row.insert(field.name().clone(), value_at(col.as_ref(), i));
        }
        out.push(row);
    }
}

fn value_at(a: &dyn Array, i: usize) -> Value {
    if a.is_null(i) {
        return Value::Null;
    }
    match a.data_type() {
        DataType::Utf8 => Value::String(a.as_string::<i32>().value(i).to_string()),
        DataType::LargeUtf8 => Value::String(a.as_string::<i64>().value(i).to_string()),
        DataType::Utf8View => Value::String(a.as_string_view().value(i).to_string()),
        DataType::Boolean => Value::Bool(a.as_boolean().value(i)),
        DataType::Int8 => a.as_primitive::<Int8Type>().value(i).into(),
        DataType::Int16 => a.as_primitive::<Int16Type>().value(i).into(),
        DataType::Int32 => a.as_primitive::<Int32Type>().value(i).into(),
        DataType::Int64 => a.as_primitive::<Int64Type>().value(i).into(),
        DataType::UInt8 => a.as_primitive::<UInt8Type>().value(i).into(),
        DataType::UInt16 => a.as_primitive::<UInt16Type>().value(i).into(),
        DataType::UInt32 => a.as_primitive::<UInt32Type>().value(i).into(),
        DataType::UInt64 => a.as_primitive::<UInt64Type>().value(i).into(),
        DataType::Float32 => f64::from(a.as_primitive::<Float32Type>().value(i)).into(),
        DataType::Float64 => a.as_primitive::<Float64Type>().value(i).into(),
        DataType::List(_) => list_value(a.as_list::<i32>().value(i).as_ref()),
        DataType::LargeList(_) => list_value(a.as_list::<i64>().value(i).as_ref()),
        DataType::Struct(fields) => {
            let s = a.as_struct();
            let mut m = Map::new();
            for (f, c) in fields.iter().zip(s.columns()) {
                m.insert(f.name().clone(), value_at(c.as_ref(), i));
            }
            Value::Object(m)
        }
        _ => Value::Null,
    }
}

fn list_value(values: &dyn Array) -> Value {
    Value::Array((0..values.len()).map(|j| value_at(values, j)).collect())
}

/// The strings of a JSON list, or the index of the first item that is not a
/// string (for an error that names `field[index]`).
#[cfg(feature = "hub")]
pub(crate) fn string_items(items: &[Value]) -> Result<Vec<String>, usize> {
    items
        .iter()
        .enumerate()
        .map(|(j, v)| v.as_str().map(str::to_string).ok_or(j))
        .collect()
}

#[cfg(feature = "hub")]
pub(crate) fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(all(test, feature = "hub"))]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn string_items_names_the_first_item_that_is_not_a_string() {
        let ok = json!(["a", "b"]);
        assert_eq!(
            string_items(ok.as_array().unwrap()),
            Ok(vec!["a".into(), "b".into()])
        );
        let bad = json!(["a", 2, null]);
        assert_eq!(string_items(bad.as_array().unwrap()), Err(1));
        assert_eq!(string_items(&[]), Ok(vec![]));
    }
}
