//! The Arrow schema of a records file and the conversion to and from it.

use std::sync::{Arc, LazyLock};

use arrow_array::builder::{
    BooleanBuilder, Float64Builder, ListBuilder, StringBuilder, TimestampNanosecondBuilder,
    UInt16Builder, UInt32Builder, UInt64Builder,
};
use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float64Type, TimestampNanosecondType, UInt16Type, UInt32Type, UInt64Type,
};
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};

use crate::error::RecordError;
use crate::record::{ErrorKind, RequestRecord, ServerTimings, SpecDecodeStats, SpecSource};

/// Version of the column layout; bumped on any incompatible change.
pub const SCHEMA_VERSION: &str = "1";

fn list_of(item: DataType) -> DataType {
    DataType::List(Arc::new(Field::new("item", item, true)))
}

fn timestamp() -> DataType {
    DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()))
}

static SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    use DataType::*;
    let f = |name: &str, ty: DataType, nullable: bool| Field::new(name, ty, nullable);
    Arc::new(Schema::new(vec![
        f("run_id", Utf8, false),
        f("request_index", UInt64, false),
        f("conversation_id", Utf8, false),
        f("turn_index", UInt32, false),
        f("dataset", Utf8, false),
        f("category", Utf8, true),
        f("model", Utf8, false),
        f("warmup", Boolean, false),
        f("start_time", timestamp(), false),
        f("end_time", timestamp(), false),
        f("ttft_ns", UInt64, true),
        f("inter_chunk_latencies_ns", list_of(UInt64), false),
        f("e2e_latency_ns", UInt64, false),
        f("prompt_tokens", UInt64, true),
        f("completion_tokens", UInt64, true),
        f("output_chunks", UInt64, false),
        f("finish_reason", Utf8, true),
        f("http_status", UInt16, true),
        f("error_kind", Utf8, true),
        f("error_message", Utf8, true),
        f("output_text", Utf8, false),
        f("spec_source", Utf8, true),
        f("spec_accepted_draft_tokens", UInt64, true),
        f("spec_proposed_draft_tokens", UInt64, true),
        f("spec_verify_steps", UInt64, true),
        f("spec_num_spec_tokens", UInt32, true),
        f("spec_acceptance_histogram", list_of(UInt64), true),
        f("spec_per_step_accepted", list_of(UInt32), true),
        f("spec_per_step_drafted", list_of(UInt32), true),
        f("timings_prompt_n", UInt64, true),
        f("timings_cache_n", UInt64, true),
        f("timings_prompt_ms", Float64, true),
        f("timings_prompt_per_second", Float64, true),
        f("timings_predicted_n", UInt64, true),
        f("timings_predicted_ms", Float64, true),
        f("timings_predicted_per_second", Float64, true),
    ]))
});

/// The Arrow schema every records file uses (without run metadata).
///
/// Column meanings are documented in `docs/record-schema.md`; the columns map
/// one-to-one onto [`RequestRecord`] fields, with the nested
/// [`SpecDecodeStats`] and [`ServerTimings`] flattened under `spec_` and
/// `timings_` prefixes so that SQL engines and dataframes read them directly.
pub fn record_schema() -> SchemaRef {
    SCHEMA.clone()
}

/// Accumulates records into Arrow builders, one column per field.
pub(crate) struct BatchBuilder {
    run_id: StringBuilder,
    request_index: UInt64Builder,
    conversation_id: StringBuilder,
    turn_index: UInt32Builder,
    dataset: StringBuilder,
    category: StringBuilder,
    model: StringBuilder,
    warmup: BooleanBuilder,
    start_time: TimestampNanosecondBuilder,
    end_time: TimestampNanosecondBuilder,
    ttft_ns: UInt64Builder,
    inter_chunk: ListBuilder<UInt64Builder>,
    e2e: UInt64Builder,
    prompt_tokens: UInt64Builder,
    completion_tokens: UInt64Builder,
    output_chunks: UInt64Builder,
    finish_reason: StringBuilder,
    http_status: UInt16Builder,
    error_kind: StringBuilder,
    error_message: StringBuilder,
    output_text: StringBuilder,
    spec_source: StringBuilder,
    spec_accepted: UInt64Builder,
    spec_proposed: UInt64Builder,
    spec_steps: UInt64Builder,
    spec_k: UInt32Builder,
    spec_hist: ListBuilder<UInt64Builder>,
    spec_step_acc: ListBuilder<UInt32Builder>,
    spec_step_draft: ListBuilder<UInt32Builder>,
    t_prompt_n: UInt64Builder,
    t_cache_n: UInt64Builder,
    t_prompt_ms: Float64Builder,
    t_prompt_ps: Float64Builder,
    t_pred_n: UInt64Builder,
    t_pred_ms: Float64Builder,
    t_pred_ps: Float64Builder,
    len: usize,
}

fn list_u64() -> ListBuilder<UInt64Builder> {
    ListBuilder::new(UInt64Builder::new())
}

fn list_u32() -> ListBuilder<UInt32Builder> {
    ListBuilder::new(UInt32Builder::new())
}

impl BatchBuilder {
    pub(crate) fn new() -> Self {
        BatchBuilder {
            run_id: StringBuilder::new(),
            request_index: UInt64Builder::new(),
            conversation_id: StringBuilder::new(),
            turn_index: UInt32Builder::new(),
            dataset: StringBuilder::new(),
            category: StringBuilder::new(),
            model: StringBuilder::new(),
            warmup: BooleanBuilder::new(),
            start_time: TimestampNanosecondBuilder::new().with_timezone("UTC"),
            end_time: TimestampNanosecondBuilder::new().with_timezone("UTC"),
            ttft_ns: UInt64Builder::new(),
            inter_chunk: list_u64(),
            e2e: UInt64Builder::new(),
            prompt_tokens: UInt64Builder::new(),
            completion_tokens: UInt64Builder::new(),
            output_chunks: UInt64Builder::new(),
            finish_reason: StringBuilder::new(),
            http_status: UInt16Builder::new(),
            error_kind: StringBuilder::new(),
            error_message: StringBuilder::new(),
            output_text: StringBuilder::new(),
            spec_source: StringBuilder::new(),
            spec_accepted: UInt64Builder::new(),
            spec_proposed: UInt64Builder::new(),
            spec_steps: UInt64Builder::new(),
            spec_k: UInt32Builder::new(),
            spec_hist: list_u64(),
            spec_step_acc: list_u32(),
            spec_step_draft: list_u32(),
            t_prompt_n: UInt64Builder::new(),
            t_cache_n: UInt64Builder::new(),
            t_prompt_ms: Float64Builder::new(),
            t_prompt_ps: Float64Builder::new(),
            t_pred_n: UInt64Builder::new(),
            t_pred_ms: Float64Builder::new(),
            t_pred_ps: Float64Builder::new(),
            len: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn push(&mut self, r: &RequestRecord) {
        self.run_id.append_value(&r.run_id);
        self.request_index.append_value(r.request_index);
        self.conversation_id.append_value(&r.conversation_id);
        self.turn_index.append_value(r.turn_index);
        self.dataset.append_value(&r.dataset);
        self.category.append_option(r.category.as_deref());
        self.model.append_value(&r.model);
        self.warmup.append_value(r.warmup);
        self.start_time.append_value(r.start_unix_ns);
        self.end_time.append_value(r.end_unix_ns);
        self.ttft_ns.append_option(r.ttft_ns);
        self.inter_chunk
            .append_value(r.inter_chunk_latencies_ns.iter().map(|v| Some(*v)));
        self.e2e.append_value(r.e2e_latency_ns);
        self.prompt_tokens.append_option(r.prompt_tokens);
        self.completion_tokens.append_option(r.completion_tokens);
        self.output_chunks.append_value(r.output_chunks);
        self.finish_reason.append_option(r.finish_reason.as_deref());
        self.http_status.append_option(r.http_status);
        self.error_kind
            .append_option(r.error_kind.map(ErrorKind::as_str));
        self.error_message.append_option(r.error_message.as_deref());
        self.output_text.append_value(&r.output_text);
        self.push_spec(r.spec.as_ref());
        self.push_timings(r.server_timings.as_ref());
        self.len += 1;
    }

    fn push_spec(&mut self, spec: Option<&SpecDecodeStats>) {
        match spec {
            Some(s) => {
                self.spec_source
                    .append_value(s.source.map(SpecSource::as_str).unwrap_or("unknown"));
                self.spec_accepted.append_value(s.accepted_draft_tokens);
                self.spec_proposed.append_value(s.proposed_draft_tokens);
                self.spec_steps.append_option(s.verify_steps);
                self.spec_k.append_option(s.num_spec_tokens);
                self.spec_hist
                    .append_value(s.acceptance_histogram.iter().map(|v| Some(*v)));
                append_opt_list(&mut self.spec_step_acc, s.per_step_accepted.as_deref());
                append_opt_list(&mut self.spec_step_draft, s.per_step_drafted.as_deref());
            }
            None => {
                self.spec_source.append_null();
                self.spec_accepted.append_null();
                self.spec_proposed.append_null();
                self.spec_steps.append_null();
                self.spec_k.append_null();
                self.spec_hist.append_null();
                self.spec_step_acc.append_null();
                self.spec_step_draft.append_null();
            }
        }
    }

    fn push_timings(&mut self, t: Option<&ServerTimings>) {
        let t = t.cloned().unwrap_or_default();
        self.t_prompt_n.append_option(t.prompt_n);
        self.t_cache_n.append_option(t.cache_n);
        self.t_prompt_ms.append_option(t.prompt_ms);
        self.t_prompt_ps.append_option(t.prompt_per_second);
        self.t_pred_n.append_option(t.predicted_n);
        self.t_pred_ms.append_option(t.predicted_ms);
        self.t_pred_ps.append_option(t.predicted_per_second);
    }

    /// Finishes the accumulated rows into one batch and resets the builder.
    pub(crate) fn finish(&mut self) -> Result<RecordBatch, arrow_schema::ArrowError> {
        self.len = 0;
        let columns: Vec<ArrayRef> = vec![
            Arc::new(self.run_id.finish()),
            Arc::new(self.request_index.finish()),
            Arc::new(self.conversation_id.finish()),
            Arc::new(self.turn_index.finish()),
            Arc::new(self.dataset.finish()),
            Arc::new(self.category.finish()),
            Arc::new(self.model.finish()),
            Arc::new(self.warmup.finish()),
            Arc::new(self.start_time.finish()),
            Arc::new(self.end_time.finish()),
            Arc::new(self.ttft_ns.finish()),
            Arc::new(self.inter_chunk.finish()),
            Arc::new(self.e2e.finish()),
            Arc::new(self.prompt_tokens.finish()),
            Arc::new(self.completion_tokens.finish()),
            Arc::new(self.output_chunks.finish()),
            Arc::new(self.finish_reason.finish()),
            Arc::new(self.http_status.finish()),
            Arc::new(self.error_kind.finish()),
            Arc::new(self.error_message.finish()),
            Arc::new(self.output_text.finish()),
            Arc::new(self.spec_source.finish()),
            Arc::new(self.spec_accepted.finish()),
            Arc::new(self.spec_proposed.finish()),
            Arc::new(self.spec_steps.finish()),
            Arc::new(self.spec_k.finish()),
            Arc::new(self.spec_hist.finish()),
            Arc::new(self.spec_step_acc.finish()),
            Arc::new(self.spec_step_draft.finish()),
            Arc::new(self.t_prompt_n.finish()),
            Arc::new(self.t_cache_n.finish()),
            Arc::new(self.t_prompt_ms.finish()),
            Arc::new(self.t_prompt_ps.finish()),
            Arc::new(self.t_pred_n.finish()),
            Arc::new(self.t_pred_ms.finish()),
            Arc::new(self.t_pred_ps.finish()),
        ];
        RecordBatch::try_new(record_schema(), columns)
    }
}

fn append_opt_list(builder: &mut ListBuilder<UInt32Builder>, values: Option<&[u32]>) {
    match values {
        Some(v) => builder.append_value(v.iter().map(|x| Some(*x))),
        None => builder.append_null(),
    }
}

/// Fills the columns a projected read skipped with nulls, so the batch has
/// the full schema's shape (with every field nullable).
pub(crate) fn complete_batch(batch: &RecordBatch) -> Result<RecordBatch, arrow_schema::ArrowError> {
    let rows = batch.num_rows();
    let mut fields = Vec::with_capacity(SCHEMA.fields().len());
    let mut columns = Vec::with_capacity(SCHEMA.fields().len());
    for field in SCHEMA.fields() {
        let column = match batch.column_by_name(field.name()) {
            Some(c) => c.clone(),
            None => arrow_array::new_null_array(field.data_type(), rows),
        };
        fields.push(field.as_ref().clone().with_nullable(true));
        columns.push(column);
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
}

/// Typed views of one batch's columns, checked against the schema once.
struct Columns<'a> {
    batch: &'a RecordBatch,
    source: &'a str,
}

impl<'a> Columns<'a> {
    fn column(&self, name: &str) -> Result<&'a ArrayRef, RecordError> {
        let schema_field = SCHEMA
            .field_with_name(name)
            .map_err(|_| RecordError::Schema {
                path: self.source.into(),
                column: name.into(),
                message: "not a column of the record schema".into(),
            })?;
        let col = self
            .batch
            .column_by_name(name)
            .ok_or_else(|| RecordError::Schema {
                path: self.source.into(),
                column: name.into(),
                message: "column is missing".into(),
            })?;
        if col.data_type() != schema_field.data_type() {
            return Err(RecordError::Schema {
                path: self.source.into(),
                column: name.into(),
                message: format!(
                    "expected type {}, found {}",
                    schema_field.data_type(),
                    col.data_type()
                ),
            });
        }
        Ok(col)
    }

    fn strings(&self, name: &str) -> Result<&'a arrow_array::StringArray, RecordError> {
        Ok(self.column(name)?.as_string::<i32>())
    }

    fn u64s(&self, name: &str) -> Result<&'a arrow_array::UInt64Array, RecordError> {
        Ok(self.column(name)?.as_primitive::<UInt64Type>())
    }

    fn u32s(&self, name: &str) -> Result<&'a arrow_array::UInt32Array, RecordError> {
        Ok(self.column(name)?.as_primitive::<UInt32Type>())
    }

    fn f64s(&self, name: &str) -> Result<&'a arrow_array::Float64Array, RecordError> {
        Ok(self.column(name)?.as_primitive::<Float64Type>())
    }

    fn lists(&self, name: &str) -> Result<&'a arrow_array::ListArray, RecordError> {
        Ok(self.column(name)?.as_list::<i32>())
    }
}

fn opt_str(a: &arrow_array::StringArray, i: usize) -> Option<String> {
    a.is_valid(i).then(|| a.value(i).to_string())
}

fn opt<T: arrow_array::ArrowPrimitiveType>(
    a: &arrow_array::PrimitiveArray<T>,
    i: usize,
) -> Option<T::Native> {
    a.is_valid(i).then(|| a.value(i))
}

fn list_values<T: arrow_array::ArrowPrimitiveType>(
    a: &arrow_array::ListArray,
    i: usize,
) -> Option<Vec<T::Native>> {
    if a.is_null(i) {
        return None;
    }
    let values = a.value(i);
    let prim = values.as_primitive::<T>();
    Some(prim.iter().flatten().collect())
}

/// Converts one batch back into records, checking every column's type.
///
/// `source` names the file in error messages; `first_row` is the index of the
/// batch's first row within that file.
pub(crate) fn batch_to_records(
    batch: &RecordBatch,
    source: &str,
    first_row: usize,
    out: &mut Vec<RequestRecord>,
) -> Result<(), RecordError> {
    let c = Columns { batch, source };
    let run_id = c.strings("run_id")?;
    let request_index = c.u64s("request_index")?;
    let conversation_id = c.strings("conversation_id")?;
    let turn_index = c.u32s("turn_index")?;
    let dataset = c.strings("dataset")?;
    let category = c.strings("category")?;
    let model = c.strings("model")?;
    let warmup = c.column("warmup")?.as_boolean();
    let start = c
        .column("start_time")?
        .as_primitive::<TimestampNanosecondType>();
    let end = c
        .column("end_time")?
        .as_primitive::<TimestampNanosecondType>();
    let ttft = c.u64s("ttft_ns")?;
    let inter_chunk = c.lists("inter_chunk_latencies_ns")?;
    let e2e = c.u64s("e2e_latency_ns")?;
    let prompt_tokens = c.u64s("prompt_tokens")?;
    let completion_tokens = c.u64s("completion_tokens")?;
    let output_chunks = c.u64s("output_chunks")?;
    let finish_reason = c.strings("finish_reason")?;
    let http_status = c.column("http_status")?.as_primitive::<UInt16Type>();
    let error_kind = c.strings("error_kind")?;
    let error_message = c.strings("error_message")?;
    let output_text = c.strings("output_text")?;
    let spec_source = c.strings("spec_source")?;
    let spec_accepted = c.u64s("spec_accepted_draft_tokens")?;
    let spec_proposed = c.u64s("spec_proposed_draft_tokens")?;
    let spec_steps = c.u64s("spec_verify_steps")?;
    let spec_k = c.u32s("spec_num_spec_tokens")?;
    let spec_hist = c.lists("spec_acceptance_histogram")?;
    let spec_step_acc = c.lists("spec_per_step_accepted")?;
    let spec_step_draft = c.lists("spec_per_step_drafted")?;
    let t_prompt_n = c.u64s("timings_prompt_n")?;
    let t_cache_n = c.u64s("timings_cache_n")?;
    let t_prompt_ms = c.f64s("timings_prompt_ms")?;
    let t_prompt_ps = c.f64s("timings_prompt_per_second")?;
    let t_pred_n = c.u64s("timings_predicted_n")?;
    let t_pred_ms = c.f64s("timings_predicted_ms")?;
    let t_pred_ps = c.f64s("timings_predicted_per_second")?;

    out.reserve(batch.num_rows());
    for i in 0..batch.num_rows() {
        let invalid = |column: &str, message: String| RecordError::InvalidValue {
            path: source.into(),
            row: first_row + i,
            column: column.into(),
            message,
        };
        let error_kind = match opt_str(error_kind, i) {
            None => None,
            Some(name) => Some(
                ErrorKind::parse(&name)
                    .ok_or_else(|| invalid("error_kind", format!("unknown error kind {name:?}")))?,
            ),
        };
        let spec = match opt_str(spec_source, i) {
            None => None,
            Some(name) => Some(SpecDecodeStats {
                source: SpecSource::parse(&name),
                accepted_draft_tokens: opt(spec_accepted, i).ok_or_else(|| {
                    invalid(
                        "spec_accepted_draft_tokens",
                        "null while spec_source is set".into(),
                    )
                })?,
                proposed_draft_tokens: opt(spec_proposed, i).ok_or_else(|| {
                    invalid(
                        "spec_proposed_draft_tokens",
                        "null while spec_source is set".into(),
                    )
                })?,
                verify_steps: opt(spec_steps, i),
                num_spec_tokens: opt(spec_k, i),
                acceptance_histogram: list_values::<UInt64Type>(spec_hist, i).unwrap_or_default(),
                per_step_accepted: list_values::<UInt32Type>(spec_step_acc, i),
                per_step_drafted: list_values::<UInt32Type>(spec_step_draft, i),
            }),
        };
        let timings = ServerTimings {
            prompt_n: opt(t_prompt_n, i),
            cache_n: opt(t_cache_n, i),
            prompt_ms: opt(t_prompt_ms, i),
            prompt_per_second: opt(t_prompt_ps, i),
            predicted_n: opt(t_pred_n, i),
            predicted_ms: opt(t_pred_ms, i),
            predicted_per_second: opt(t_pred_ps, i),
        };
        let server_timings = (timings != ServerTimings::default()).then_some(timings);
        out.push(RequestRecord {
            run_id: run_id.value(i).to_string(),
            request_index: request_index.value(i),
            conversation_id: conversation_id.value(i).to_string(),
            turn_index: turn_index.value(i),
            dataset: dataset.value(i).to_string(),
            category: opt_str(category, i),
            model: model.value(i).to_string(),
            warmup: warmup.value(i),
            start_unix_ns: start.value(i),
            end_unix_ns: end.value(i),
            ttft_ns: opt(ttft, i),
            inter_chunk_latencies_ns: list_values::<UInt64Type>(inter_chunk, i).unwrap_or_default(),
            e2e_latency_ns: e2e.value(i),
            prompt_tokens: opt(prompt_tokens, i),
            completion_tokens: opt(completion_tokens, i),
            output_chunks: output_chunks.value(i),
            finish_reason: opt_str(finish_reason, i),
            http_status: opt(http_status, i),
            error_kind,
            error_message: opt_str(error_message, i),
            output_text: output_text.value(i).to_string(),
            spec,
            server_timings,
        });
    }
    Ok(())
}
