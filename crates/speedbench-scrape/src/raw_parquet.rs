//! The raw export written as Parquet, in AIPerf 0.13.0's schema (its
//! `server_metrics_export.parquet`): the fixed columns, a nullable string
//! column per label, then the value columns; Snappy-compressed.

use std::path::Path;
use std::sync::Arc;

use arrow_array::builder::{Float64Builder, Int64Builder, StringBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;

use crate::error::ScrapeError;
use crate::raw::{RawRow, RawServerMetrics};

/// Rows per record batch (AIPerf streams 10,000 at a time too).
const BATCH_ROWS: usize = 10_000;

impl RawServerMetrics {
    /// The Arrow schema of the file: `endpoint_url`, `metric_name`,
    /// `metric_type`, `unit`, `description`, `timestamp_ns`, the label
    /// columns (sorted), `value`, `sum`, `count`, `bucket_le`,
    /// `bucket_count`.
    pub fn schema(&self) -> Schema {
        let text = |name: &str, nullable| Field::new(name, DataType::Utf8, nullable);
        let number = |name: &str| Field::new(name, DataType::Float64, true);
        let mut fields = vec![
            text("endpoint_url", false),
            text("metric_name", false),
            text("metric_type", false),
            text("unit", true),
            text("description", true),
            Field::new("timestamp_ns", DataType::Int64, false),
        ];
        fields.extend(self.label_keys.iter().map(|k| text(k, true)));
        fields.extend([
            number("value"),
            number("sum"),
            number("count"),
            text("bucket_le", true),
            number("bucket_count"),
        ]);
        Schema::new(fields)
    }

    /// Writes the rows to `path` (through a temporary file beside it, so
    /// a reader never sees half of one); the rows written.
    pub fn write_parquet(&self, path: &Path) -> Result<usize, ScrapeError> {
        let io = |source: std::io::Error| ScrapeError::Io {
            path: path.to_path_buf(),
            source,
        };
        let parquet = |e: parquet::errors::ParquetError| io(std::io::Error::other(e));
        let tmp = path.with_extension("parquet.tmp");
        let schema = Arc::new(self.schema());
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_key_value_metadata(Some(self.metadata()))
            .build();
        let file = std::fs::File::create(&tmp).map_err(io)?;
        let mut writer =
            ArrowWriter::try_new(file, schema.clone(), Some(props)).map_err(parquet)?;
        // Rows are made a batch at a time: the file, not memory, holds
        // them all.
        let mut rows = self.rows().peekable();
        let written = (|| {
            while rows.peek().is_some() {
                let chunk: Vec<RawRow> = rows.by_ref().take(BATCH_ROWS).collect();
                let batch = RecordBatch::try_new(schema.clone(), self.columns(&chunk))
                    .map_err(|e| io(std::io::Error::other(e)))?;
                writer.write(&batch).map_err(parquet)?;
            }
            writer.close().map_err(parquet)?;
            std::fs::rename(&tmp, path).map_err(io)
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written.map(|()| self.row_count())
    }

    /// What the file says of itself (AIPerf keeps its provenance under
    /// `aiperf.*`; these are speedbench's).
    fn metadata(&self) -> Vec<KeyValue> {
        let labels = serde_json::to_string(&self.label_keys).unwrap_or_default();
        let mut kv = vec![
            KeyValue::new(
                "speedbench.exporter".into(),
                "server metrics, raw samples".to_string(),
            ),
            KeyValue::new(
                "speedbench.schema".into(),
                "aiperf 0.13.0 server_metrics_export.parquet".to_string(),
            ),
            KeyValue::new("speedbench.label_columns".into(), labels),
        ];
        let bounds = [("start", self.window.start), ("end", self.window.end)];
        for (side, at) in bounds {
            if let Some(ns) = at {
                kv.push(KeyValue::new(
                    format!("speedbench.time_filter_{side}_ns"),
                    ns.to_string(),
                ));
            }
        }
        kv
    }

    /// The columns of `rows`, in the schema's order.
    fn columns(&self, rows: &[RawRow]) -> Vec<ArrayRef> {
        let text = |f: &dyn Fn(&RawRow) -> Option<&str>| -> ArrayRef {
            let mut b = StringBuilder::new();
            rows.iter().for_each(|r| b.append_option(f(r)));
            Arc::new(b.finish())
        };
        let number = |f: &dyn Fn(&RawRow) -> Option<f64>| -> ArrayRef {
            let mut b = Float64Builder::new();
            rows.iter().for_each(|r| b.append_option(f(r)));
            Arc::new(b.finish())
        };
        let mut times = Int64Builder::new();
        rows.iter().for_each(|r| times.append_value(r.timestamp_ns));
        let mut columns = vec![
            text(&|r| Some(&r.endpoint_url)),
            text(&|r| Some(&r.metric_name)),
            text(&|r| Some(r.metric_type)),
            text(&|r| r.unit),
            text(&|r| r.description.as_deref()),
            Arc::new(times.finish()) as ArrayRef,
        ];
        for key in &self.label_keys {
            columns.push(text(&|r| r.labels.get(key).map(String::as_str)));
        }
        columns.extend([
            number(&|r| r.value),
            number(&|r| r.sum),
            number(&|r| r.count),
            text(&|r| r.bucket_le.as_deref()),
            number(&|r| r.bucket_count),
        ]);
        columns
    }
}
