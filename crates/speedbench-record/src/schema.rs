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

use crate::columns;
use crate::custom::{CUSTOM_COLUMN_PREFIX, CustomColumn, CustomKind, CustomValue};
use crate::error::RecordError;
use crate::phase_columns::{PhaseBuilders, PhaseColumns};
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
        f(columns::RUN_ID, Utf8, false),
        f(columns::REQUEST_INDEX, UInt64, false),
        f(columns::CONVERSATION_ID, Utf8, false),
        f(columns::TURN_INDEX, UInt32, false),
        f(columns::DATASET, Utf8, false),
        f(columns::CATEGORY, Utf8, true),
        f(columns::MODEL, Utf8, false),
        f(columns::WARMUP, Boolean, false),
        f(columns::START_TIME, timestamp(), false),
        f(columns::END_TIME, timestamp(), false),
        f(columns::TTFT_NS, UInt64, true),
        f(columns::INTER_CHUNK_LATENCIES_NS, list_of(UInt64), false),
        f(columns::E2E_LATENCY_NS, UInt64, false),
        f(columns::PROMPT_TOKENS, UInt64, true),
        f(columns::COMPLETION_TOKENS, UInt64, true),
        f(columns::OUTPUT_CHUNKS, UInt64, false),
        f(columns::FINISH_REASON, Utf8, true),
        f(columns::HTTP_STATUS, UInt16, true),
        f(columns::ERROR_KIND, Utf8, true),
        f(columns::ERROR_MESSAGE, Utf8, true),
        f(columns::OUTPUT_TEXT, Utf8, false),
        f(columns::SPEC_SOURCE, Utf8, true),
        f(columns::SPEC_ACCEPTED_DRAFT_TOKENS, UInt64, true),
        f(columns::SPEC_PROPOSED_DRAFT_TOKENS, UInt64, true),
        f(columns::SPEC_VERIFY_STEPS, UInt64, true),
        f(columns::SPEC_NUM_SPEC_TOKENS, UInt32, true),
        f(columns::SPEC_ACCEPTANCE_HISTOGRAM, list_of(UInt64), true),
        f(columns::SPEC_PER_STEP_ACCEPTED, list_of(UInt32), true),
        f(columns::SPEC_PER_STEP_DRAFTED, list_of(UInt32), true),
        f(columns::TIMINGS_PROMPT_N, UInt64, true),
        f(columns::TIMINGS_CACHE_N, UInt64, true),
        f(columns::TIMINGS_PROMPT_MS, Float64, true),
        f(columns::TIMINGS_PROMPT_PER_SECOND, Float64, true),
        f(columns::TIMINGS_PREDICTED_N, UInt64, true),
        f(columns::TIMINGS_PREDICTED_MS, Float64, true),
        f(columns::TIMINGS_PREDICTED_PER_SECOND, Float64, true),
        f(columns::PROMPT_SHA256, Utf8, true),
        f(columns::SPEC_DROPPED, Utf8, true),
        f(columns::TOKENS_PER_ITERATION, Float64, true),
        f(columns::RESENDS, UInt32, true),
        f(columns::SERVER_INDEX, UInt32, true),
        f(columns::HTTP_BLOCKED_NS, UInt64, true),
        f(columns::HTTP_DNS_LOOKUP_NS, UInt64, true),
        f(columns::HTTP_CONNECTING_NS, UInt64, true),
        f(columns::HTTP_SENDING_NS, UInt64, true),
        f(columns::HTTP_WAITING_NS, UInt64, true),
        f(columns::HTTP_RECEIVING_NS, UInt64, true),
        f(columns::HTTP_CONNECTION_REUSED, Boolean, true),
        f(columns::HTTP_BYTES_SENT, UInt64, true),
        f(columns::HTTP_BYTES_RECEIVED, UInt64, true),
        f(columns::HTTP_CHUNKS_SENT, UInt64, true),
        f(columns::HTTP_CHUNKS_RECEIVED, UInt64, true),
    ]))
});

/// The Arrow schema every records file uses (without run metadata).
///
/// Column meanings are documented in `docs/record-schema.md`; the columns map
/// one-to-one onto [`RequestRecord`] fields, with the nested
/// [`SpecDecodeStats`], [`ServerTimings`] and [`crate::HttpPhases`] flattened
/// under `spec_`, `timings_` and `http_` prefixes so that SQL engines and dataframes read them directly.
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
    prompt_sha256: StringBuilder,
    spec_dropped: StringBuilder,
    tokens_per_iteration: Float64Builder,
    resends: UInt32Builder,
    server_index: UInt32Builder,
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
    phases: PhaseBuilders,
    custom: Vec<(CustomColumn, CustomBuilder)>,
    schema: SchemaRef,
    len: usize,
}

fn list_u64() -> ListBuilder<UInt64Builder> {
    ListBuilder::new(UInt64Builder::new())
}

fn list_u32() -> ListBuilder<UInt32Builder> {
    ListBuilder::new(UInt32Builder::new())
}

/// The Arrow type a custom column of `kind` is written as.
pub(crate) fn custom_data_type(kind: CustomKind) -> DataType {
    match kind {
        CustomKind::Int64 => DataType::Int64,
        CustomKind::Float64 => DataType::Float64,
        CustomKind::Utf8 => DataType::Utf8,
        CustomKind::Boolean => DataType::Boolean,
    }
}

/// The record schema followed by `custom`'s columns (nullable).
pub(crate) fn schema_with(custom: &[CustomColumn]) -> SchemaRef {
    if custom.is_empty() {
        return record_schema();
    }
    let mut fields: Vec<Field> = SCHEMA.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.extend(
        custom
            .iter()
            .map(|c| Field::new(c.name(), custom_data_type(c.kind()), true)),
    );
    Arc::new(Schema::new(fields))
}

enum CustomBuilder {
    Int64(arrow_array::builder::Int64Builder),
    Float64(Float64Builder),
    Utf8(StringBuilder),
    Boolean(BooleanBuilder),
}

impl CustomBuilder {
    fn new(kind: CustomKind) -> Self {
        match kind {
            CustomKind::Int64 => CustomBuilder::Int64(Default::default()),
            CustomKind::Float64 => CustomBuilder::Float64(Default::default()),
            CustomKind::Utf8 => CustomBuilder::Utf8(Default::default()),
            CustomKind::Boolean => CustomBuilder::Boolean(Default::default()),
        }
    }

    /// Appends `value` (already checked to be of this builder's kind) or null.
    fn append(&mut self, value: Option<&CustomValue>) {
        match (self, value) {
            (CustomBuilder::Int64(b), Some(CustomValue::Int64(v))) => b.append_value(*v),
            (CustomBuilder::Float64(b), Some(CustomValue::Float64(v))) => b.append_value(*v),
            (CustomBuilder::Utf8(b), Some(CustomValue::Utf8(v))) => b.append_value(v),
            (CustomBuilder::Boolean(b), Some(CustomValue::Boolean(v))) => b.append_value(*v),
            (CustomBuilder::Int64(b), _) => b.append_null(),
            (CustomBuilder::Float64(b), _) => b.append_null(),
            (CustomBuilder::Utf8(b), _) => b.append_null(),
            (CustomBuilder::Boolean(b), _) => b.append_null(),
        }
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            CustomBuilder::Int64(b) => Arc::new(b.finish()),
            CustomBuilder::Float64(b) => Arc::new(b.finish()),
            CustomBuilder::Utf8(b) => Arc::new(b.finish()),
            CustomBuilder::Boolean(b) => Arc::new(b.finish()),
        }
    }
}

impl BatchBuilder {
    pub(crate) fn new(custom: &[CustomColumn]) -> Self {
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
            prompt_sha256: StringBuilder::new(),
            spec_dropped: StringBuilder::new(),
            tokens_per_iteration: Float64Builder::new(),
            resends: UInt32Builder::new(),
            server_index: UInt32Builder::new(),
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
            phases: PhaseBuilders::default(),
            custom: custom
                .iter()
                .map(|c| (c.clone(), CustomBuilder::new(c.kind())))
                .collect(),
            schema: schema_with(custom),
            len: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The schema of the batches this builder makes.
    pub(crate) fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Appends one record; a custom value whose column is not declared or
    /// holds another kind is refused (`(column, why)`), and nothing of the
    /// record is appended then.
    pub(crate) fn push(&mut self, r: &RequestRecord) -> Result<(), (String, String)> {
        self.check_custom(r)?;
        for (column, builder) in &mut self.custom {
            builder.append(r.custom.get(column.name()));
        }
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
        self.prompt_sha256.append_option(r.prompt_sha256.as_deref());
        self.spec_dropped.append_option(r.spec_dropped.as_deref());
        self.tokens_per_iteration
            .append_option(r.tokens_per_iteration);
        self.resends.append_value(r.resends);
        self.server_index.append_option(r.server_index);
        self.push_spec(r.spec.as_ref());
        self.push_timings(r.server_timings.as_ref());
        self.phases.push(r.http_phases.as_ref());
        self.len += 1;
        Ok(())
    }

    /// Refuses a record whose custom values this file has no column for,
    /// or of another type than its column's: the column and why.
    fn check_custom(&self, r: &RequestRecord) -> Result<(), (String, String)> {
        for (name, value) in &r.custom {
            match self.custom.iter().find(|(c, _)| c.name() == name) {
                None => {
                    let declared = if self.custom.is_empty() {
                        "none".to_string()
                    } else {
                        self.custom
                            .iter()
                            .map(|(c, _)| c.name())
                            .collect::<Vec<_>>()
                            .join(", ")
                    };
                    return Err((
                        name.clone(),
                        format!("not declared (this file's custom columns: {declared})"),
                    ));
                }
                Some((c, _)) if c.kind() != value.kind() => {
                    return Err((
                        name.clone(),
                        format!("a {} value in a {} column", value.kind(), c.kind()),
                    ));
                }
                Some(_) => {}
            }
        }
        Ok(())
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
            Arc::new(self.prompt_sha256.finish()),
            Arc::new(self.spec_dropped.finish()),
            Arc::new(self.tokens_per_iteration.finish()),
            Arc::new(self.resends.finish()),
            Arc::new(self.server_index.finish()),
        ];
        let mut columns = columns;
        columns.extend(self.phases.finish());
        columns.extend(self.custom.iter_mut().map(|(_, b)| b.finish()));
        RecordBatch::try_new(self.schema.clone(), columns)
    }
}

fn append_opt_list(builder: &mut ListBuilder<UInt32Builder>, values: Option<&[u32]>) {
    match values {
        Some(v) => builder.append_value(v.iter().map(|x| Some(*x))),
        None => builder.append_null(),
    }
}

/// Converts a batch as a file stored it into the record schema's types.
///
/// Files rewritten by other tools keep our columns but not always our
/// Arrow types: polars writes `Utf8View` strings and `LargeList`s, pandas
/// `LargeUtf8` (or `Utf8View`), dictionary-encoded strings for categoricals,
/// floats for integer columns that hold nulls, and a `Null` column when
/// every value of it is null. Every width of a string, binary (checked to be
/// UTF-8), list (`List`, `LargeList`, `FixedSizeList`, `ListView`,
/// `LargeListView`, any item name), integer (range-checked) and timestamp
/// unit is accepted, and so are whole-number floats in integer columns. A
/// column of another type is an error naming the column; a value that does
/// not fit, a null in a column that must hold a value, and a null inside a
/// list are errors naming the row and the column.
///
/// Columns of the file that the schema does not know (a pandas index) are
/// left out. With `fill_missing` (a projected read), schema columns the
/// batch lacks are filled with nulls; without it they are left for
/// [`batch_to_records`] to report as missing. Every field of the result is
/// nullable.
pub(crate) fn conform_batch(
    batch: &RecordBatch,
    source: &str,
    first_row: usize,
    fill_missing: bool,
    custom: &[CustomColumn],
) -> Result<RecordBatch, RecordError> {
    let rows = batch.num_rows();
    let mut fields = Vec::with_capacity(SCHEMA.fields().len());
    let mut columns = Vec::with_capacity(SCHEMA.fields().len());
    for field in SCHEMA.fields() {
        let column = match batch.column_by_name(field.name()) {
            Some(c) => {
                let ctx = Ctx {
                    source,
                    column: field.name(),
                    first_row,
                };
                let c = conform_array(&ctx, c, field.data_type())?;
                if !field.is_nullable()
                    && let Some(row) = first_null(c.as_ref())
                {
                    return Err(ctx.value_err(row, "null in a column that must hold a value"));
                }
                c
            }
            None if fill_missing || columns::ADDED_LATER.contains(&field.name().as_str()) => {
                arrow_array::new_null_array(field.data_type(), rows)
            }
            None => continue,
        };
        fields.push(field.as_ref().clone().with_nullable(true));
        columns.push(column);
    }
    for c in custom {
        let Some(col) = batch.column_by_name(c.name()) else {
            continue;
        };
        let target = custom_data_type(c.kind());
        let ctx = Ctx {
            source,
            column: c.name(),
            first_row,
        };
        columns.push(conform_array(&ctx, col, &target)?);
        fields.push(Field::new(c.name(), target, true));
    }
    let schema = Arc::new(Schema::new(fields));
    let options = arrow_array::RecordBatchOptions::new().with_row_count(Some(rows));
    RecordBatch::try_new_with_options(schema, columns, &options).map_err(|e| RecordError::Arrow {
        path: source.into(),
        source: e,
    })
}

fn first_null(array: &dyn Array) -> Option<usize> {
    let nulls = array.logical_nulls()?;
    (0..array.len()).find(|&i| nulls.is_null(i))
}

/// Where a value being converted comes from, for error messages.
struct Ctx<'a> {
    source: &'a str,
    column: &'a str,
    first_row: usize,
}

impl Ctx<'_> {
    fn type_err(&self, target: &DataType, found: &DataType) -> RecordError {
        RecordError::Schema {
            path: self.source.into(),
            column: self.column.into(),
            message: format!("expected type {target} (or another width of it), found {found}"),
        }
    }

    fn value_err(&self, row: usize, message: impl Into<String>) -> RecordError {
        RecordError::InvalidValue {
            path: self.source.into(),
            row: self.first_row + row,
            column: self.column.into(),
            message: message.into(),
        }
    }
}

fn conform_array(ctx: &Ctx, col: &ArrayRef, target: &DataType) -> Result<ArrayRef, RecordError> {
    use DataType::*;
    let found = col.data_type();
    if found == target && !matches!(target, List(_)) {
        return Ok(col.clone());
    }
    match found {
        Null => return Ok(arrow_array::new_null_array(target, col.len())),
        Dictionary(_, _) => {
            // Look every key up, then convert the plain values.
            let dict = col.as_any_dictionary();
            let keys = dict.normalized_keys();
            let indices: arrow_array::UInt64Array = (0..col.len())
                .map(|i| col.is_valid(i).then(|| keys[i] as u64))
                .collect();
            let plain = arrow_select::take::take(dict.values().as_ref(), &indices, None)
                .map_err(|e| ctx.value_err(0, format!("dictionary lookup failed: {e}")))?;
            return conform_array(ctx, &plain, target);
        }
        _ => {}
    }
    match target {
        Utf8 => to_strings(ctx, col, target),
        UInt64 => to_unsigned::<UInt64Type>(ctx, col, target),
        UInt32 => to_unsigned::<UInt32Type>(ctx, col, target),
        UInt16 => to_unsigned::<UInt16Type>(ctx, col, target),
        Float64 => to_floats(ctx, col, target),
        Int64 => to_signed(ctx, col, target),
        Timestamp(TimeUnit::Nanosecond, _) => to_timestamps(ctx, col, target),
        List(item) => to_list(ctx, col, target, item.data_type()),
        _ => Err(ctx.type_err(target, found)),
    }
}

fn to_strings(ctx: &Ctx, col: &ArrayRef, target: &DataType) -> Result<ArrayRef, RecordError> {
    use DataType::*;
    let out: arrow_array::StringArray = match col.data_type() {
        LargeUtf8 => col.as_string::<i64>().iter().collect(),
        Utf8View => col.as_string_view().iter().collect(),
        Binary => utf8_of(ctx, col.as_binary::<i32>().iter())?,
        LargeBinary => utf8_of(ctx, col.as_binary::<i64>().iter())?,
        BinaryView => utf8_of(ctx, col.as_binary_view().iter())?,
        FixedSizeBinary(_) => utf8_of(ctx, col.as_fixed_size_binary().iter())?,
        other => return Err(ctx.type_err(target, other)),
    };
    Ok(Arc::new(out))
}

fn utf8_of<'b>(
    ctx: &Ctx,
    values: impl Iterator<Item = Option<&'b [u8]>>,
) -> Result<arrow_array::StringArray, RecordError> {
    let strings = values
        .enumerate()
        .map(|(i, v)| {
            v.map(|bytes| {
                std::str::from_utf8(bytes)
                    .map_err(|e| ctx.value_err(i, format!("binary value is not UTF-8 text: {e}")))
            })
            .transpose()
        })
        .collect::<Result<Vec<Option<&str>>, _>>()?;
    Ok(strings.into_iter().collect())
}

/// Every value of an integer column (or a float column holding whole
/// numbers) as `i128`, nulls kept.
fn to_signed(ctx: &Ctx, col: &ArrayRef, target: &DataType) -> Result<ArrayRef, RecordError> {
    let values = integers(ctx, col, target)?;
    let out: arrow_array::Int64Array = values
        .into_iter()
        .enumerate()
        .map(|(i, v)| match v {
            None => Ok(None),
            Some(x) => i64::try_from(x)
                .map(Some)
                .map_err(|_| ctx.value_err(i, format!("{x} does not fit in int64"))),
        })
        .collect::<Result<_, _>>()?;
    Ok(Arc::new(out))
}

/// The custom (`x_`) columns of a file's schema, each with the kind its
/// values are read as, keeping only those in `projection` when there is one.
/// Any integer width is [`CustomKind::Int64`], any float width
/// [`CustomKind::Float64`], any string or binary width (and an all-null
/// column) [`CustomKind::Utf8`]; dictionaries take their values' kind.
pub(crate) fn custom_columns_of(
    file: &Schema,
    projection: Option<&[&str]>,
    source: &str,
) -> Result<Vec<CustomColumn>, RecordError> {
    fn kind_of(t: &DataType) -> Option<CustomKind> {
        use DataType::*;
        Some(match t {
            Int8 | Int16 | Int32 | Int64 | UInt8 | UInt16 | UInt32 | UInt64 => CustomKind::Int64,
            Float16 | Float32 | Float64 => CustomKind::Float64,
            Utf8 | LargeUtf8 | Utf8View | Binary | LargeBinary | BinaryView | Null => {
                CustomKind::Utf8
            }
            Boolean => CustomKind::Boolean,
            Dictionary(_, values) => kind_of(values)?,
            _ => return None,
        })
    }
    file.fields()
        .iter()
        .filter(|f| f.name().starts_with(CUSTOM_COLUMN_PREFIX))
        .filter(|f| projection.is_none_or(|p| p.contains(&f.name().as_str())))
        .map(|f| {
            let kind = kind_of(f.data_type()).ok_or_else(|| RecordError::Schema {
                path: source.into(),
                column: f.name().clone(),
                message: format!(
                    "a custom column holds integers, floats, strings or booleans, found {}",
                    f.data_type()
                ),
            })?;
            Ok(CustomColumn::read(f.name(), kind))
        })
        .collect()
}

fn integers(
    ctx: &Ctx,
    col: &ArrayRef,
    target: &DataType,
) -> Result<Vec<Option<i128>>, RecordError> {
    use arrow_array::types::*;
    macro_rules! ints {
        ($t:ty) => {
            col.as_primitive::<$t>()
                .iter()
                .map(|v| v.map(i128::from))
                .collect()
        };
    }
    let whole = |values: Vec<Option<f64>>| -> Result<Vec<Option<i128>>, RecordError> {
        values
            .into_iter()
            .enumerate()
            .map(|(i, v)| match v {
                None => Ok(None),
                Some(x) if x.is_finite() && x.fract() == 0.0 && x.abs() < 2f64.powi(64) => {
                    Ok(Some(x as i128))
                }
                Some(x) => Err(ctx.value_err(i, format!("{x} is not a whole number"))),
            })
            .collect()
    };
    Ok(match col.data_type() {
        DataType::Int8 => ints!(Int8Type),
        DataType::Int16 => ints!(Int16Type),
        DataType::Int32 => ints!(Int32Type),
        DataType::Int64 => ints!(Int64Type),
        DataType::UInt8 => ints!(UInt8Type),
        DataType::UInt16 => ints!(UInt16Type),
        DataType::UInt32 => ints!(UInt32Type),
        DataType::UInt64 => ints!(UInt64Type),
        DataType::Float32 => whole(
            col.as_primitive::<Float32Type>()
                .iter()
                .map(|v| v.map(f64::from))
                .collect(),
        )?,
        DataType::Float64 => whole(col.as_primitive::<Float64Type>().iter().collect())?,
        other => return Err(ctx.type_err(target, other)),
    })
}

fn to_unsigned<T>(ctx: &Ctx, col: &ArrayRef, target: &DataType) -> Result<ArrayRef, RecordError>
where
    T: arrow_array::ArrowPrimitiveType,
    T::Native: TryFrom<i128>,
{
    let values = integers(ctx, col, target)?
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            v.map(|x| {
                T::Native::try_from(x)
                    .map_err(|_| ctx.value_err(i, format!("{x} does not fit in {target}")))
            })
            .transpose()
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Arc::new(
        values
            .into_iter()
            .collect::<arrow_array::PrimitiveArray<T>>(),
    ))
}

fn to_floats(ctx: &Ctx, col: &ArrayRef, target: &DataType) -> Result<ArrayRef, RecordError> {
    let out: arrow_array::Float64Array = match col.data_type() {
        DataType::Float32 => col
            .as_primitive::<arrow_array::types::Float32Type>()
            .iter()
            .map(|v| v.map(f64::from))
            .collect(),
        DataType::Float16 => col
            .as_primitive::<arrow_array::types::Float16Type>()
            .iter()
            .map(|v| v.map(f64::from))
            .collect(),
        _ => integers(ctx, col, target)?
            .into_iter()
            .map(|v| v.map(|x| x as f64))
            .collect(),
    };
    Ok(Arc::new(out))
}

fn to_timestamps(ctx: &Ctx, col: &ArrayRef, target: &DataType) -> Result<ArrayRef, RecordError> {
    use arrow_array::types::*;
    let (values, per): (Vec<Option<i64>>, i64) = match col.data_type() {
        DataType::Timestamp(TimeUnit::Second, _) => (
            col.as_primitive::<TimestampSecondType>().iter().collect(),
            1_000_000_000,
        ),
        DataType::Timestamp(TimeUnit::Millisecond, _) => (
            col.as_primitive::<TimestampMillisecondType>()
                .iter()
                .collect(),
            1_000_000,
        ),
        DataType::Timestamp(TimeUnit::Microsecond, _) => (
            col.as_primitive::<TimestampMicrosecondType>()
                .iter()
                .collect(),
            1_000,
        ),
        // Nanoseconds with another (or no) time zone: the instants are the same.
        DataType::Timestamp(TimeUnit::Nanosecond, _) => (
            col.as_primitive::<TimestampNanosecondType>()
                .iter()
                .collect(),
            1,
        ),
        other => return Err(ctx.type_err(target, other)),
    };
    let values = values
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            v.map(|x| {
                x.checked_mul(per)
                    .ok_or_else(|| ctx.value_err(i, format!("timestamp {x} is out of range")))
            })
            .transpose()
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Arc::new(
        arrow_array::TimestampNanosecondArray::from(values).with_timezone("UTC"),
    ))
}

fn to_list(
    ctx: &Ctx,
    col: &ArrayRef,
    target: &DataType,
    item: &DataType,
) -> Result<ArrayRef, RecordError> {
    let len = col.len();
    let (values, ranges) = list_ranges(ctx, col, target)?;
    let item_ctx = Ctx {
        source: ctx.source,
        column: ctx.column,
        first_row: 0,
    };
    let values = conform_array(&item_ctx, &values, item).map_err(|e| match e {
        // A child index is not a row: report the type or value problem by column.
        RecordError::InvalidValue { message, .. } => RecordError::Schema {
            path: ctx.source.into(),
            column: ctx.column.into(),
            message: format!("list item: {message}"),
        },
        other => other,
    })?;
    let child_nulls = values.logical_nulls();
    let mut offsets = Vec::with_capacity(len + 1);
    let mut indices = Vec::new();
    offsets.push(0i32);
    for (row, range) in ranges.iter().enumerate() {
        if let Some((start, end)) = *range {
            if let Some(nulls) = &child_nulls
                && (start..end).any(|j| nulls.is_null(j))
            {
                return Err(ctx.value_err(row, "null inside the list"));
            }
            indices.extend((start..end).map(|j| j as u64));
        }
        let end = i32::try_from(indices.len())
            .map_err(|_| ctx.value_err(row, "more than 2^31 list items in one batch"))?;
        offsets.push(end);
    }
    let indices = arrow_array::UInt64Array::from(indices);
    let values = arrow_select::take::take(values.as_ref(), &indices, None)
        .map_err(|e| ctx.value_err(0, format!("list items: {e}")))?;
    let nulls = ranges
        .iter()
        .any(Option::is_none)
        .then(|| arrow_buffer::NullBuffer::from_iter(ranges.iter().map(Option::is_some)));
    let field = Arc::new(Field::new("item", item.clone(), true));
    let list = arrow_array::ListArray::try_new(
        field,
        arrow_buffer::OffsetBuffer::new(offsets.into()),
        values,
        nulls,
    )
    .map_err(|e| ctx.value_err(0, format!("list rebuild failed: {e}")))?;
    Ok(Arc::new(list))
}

/// Any Arrow list layout as its child values and each row's (start, end)
/// in them, `None` for a null row.
type ListRanges = (ArrayRef, Vec<Option<(usize, usize)>>);

fn list_ranges(ctx: &Ctx, col: &ArrayRef, target: &DataType) -> Result<ListRanges, RecordError> {
    use DataType::*;
    let len = col.len();
    let valid = |i: usize| col.is_valid(i);
    // Each row's (start, end) in the child values, None for a null row.
    Ok(match col.data_type() {
        List(_) => {
            let l = col.as_list::<i32>();
            let o = l.value_offsets();
            let r = (0..len)
                .map(|i| valid(i).then(|| (o[i] as usize, o[i + 1] as usize)))
                .collect();
            (l.values().clone(), r)
        }
        LargeList(_) => {
            let l = col.as_list::<i64>();
            let o = l.value_offsets();
            let r = (0..len)
                .map(|i| valid(i).then(|| (o[i] as usize, o[i + 1] as usize)))
                .collect();
            (l.values().clone(), r)
        }
        FixedSizeList(_, _) => {
            let l = col.as_fixed_size_list();
            let n = l.value_length() as usize;
            let r = (0..len)
                .map(|i| valid(i).then(|| (l.value_offset_at(i), l.value_offset_at(i) + n)))
                .collect();
            (l.values().clone(), r)
        }
        ListView(_) => {
            let l = col.as_list_view::<i32>();
            let (o, s) = (l.value_offsets(), l.value_sizes());
            let r = (0..len)
                .map(|i| valid(i).then(|| (o[i] as usize, (o[i] + s[i]) as usize)))
                .collect();
            (l.values().clone(), r)
        }
        LargeListView(_) => {
            let l = col.as_list_view::<i64>();
            let (o, s) = (l.value_offsets(), l.value_sizes());
            let r = (0..len)
                .map(|i| valid(i).then(|| (o[i] as usize, (o[i] + s[i]) as usize)))
                .collect();
            (l.values().clone(), r)
        }
        other => return Err(ctx.type_err(target, other)),
    })
}

/// Typed views of one batch's columns, checked against the schema once.
struct Columns<'a> {
    batch: &'a RecordBatch,
    source: &'a str,
}

/// The speculative-decoding columns of a batch.
struct SpecColumns<'a> {
    source: &'a arrow_array::StringArray,
    accepted: &'a arrow_array::UInt64Array,
    proposed: &'a arrow_array::UInt64Array,
    steps: &'a arrow_array::UInt64Array,
    k: &'a arrow_array::UInt32Array,
    histogram: &'a arrow_array::ListArray,
    step_accepted: &'a arrow_array::ListArray,
    step_drafted: &'a arrow_array::ListArray,
}

impl<'a> SpecColumns<'a> {
    fn of(c: &Columns<'a>) -> Result<SpecColumns<'a>, RecordError> {
        Ok(SpecColumns {
            source: c.strings(columns::SPEC_SOURCE)?,
            accepted: c.u64s(columns::SPEC_ACCEPTED_DRAFT_TOKENS)?,
            proposed: c.u64s(columns::SPEC_PROPOSED_DRAFT_TOKENS)?,
            steps: c.u64s(columns::SPEC_VERIFY_STEPS)?,
            k: c.u32s(columns::SPEC_NUM_SPEC_TOKENS)?,
            histogram: c.lists(columns::SPEC_ACCEPTANCE_HISTOGRAM)?,
            step_accepted: c.lists(columns::SPEC_PER_STEP_ACCEPTED)?,
            step_drafted: c.lists(columns::SPEC_PER_STEP_DRAFTED)?,
        })
    }

    /// Row `i`'s counters into `spec` (its histogram's allocation kept):
    /// none without a source; a source with null accepted or proposed
    /// counts is `invalid`.
    fn read(
        &self,
        i: usize,
        invalid: &dyn Fn(&str, String) -> RecordError,
        spec: &mut Option<SpecDecodeStats>,
    ) -> Result<(), RecordError> {
        if self.source.is_null(i) {
            *spec = None;
            return Ok(());
        }
        let required = |column: &'a arrow_array::UInt64Array, name: &str| {
            opt(column, i).ok_or_else(|| invalid(name, "null while spec_source is set".into()))
        };
        let s = spec.get_or_insert_with(SpecDecodeStats::default);
        let name = self.source.value(i);
        // A run's rows name one engine: parsed again only when it changes.
        if s.source.map(SpecSource::as_str) != Some(name) {
            s.source = SpecSource::named(name);
        }
        s.accepted_draft_tokens = required(self.accepted, "spec_accepted_draft_tokens")?;
        s.proposed_draft_tokens = required(self.proposed, "spec_proposed_draft_tokens")?;
        s.verify_steps = opt(self.steps, i);
        s.num_spec_tokens = opt(self.k, i);
        assign_list::<UInt64Type>(&mut s.acceptance_histogram, self.histogram, i);
        s.per_step_accepted = list_values::<UInt32Type>(self.step_accepted, i);
        s.per_step_drafted = list_values::<UInt32Type>(self.step_drafted, i);
        Ok(())
    }
}

/// llama.cpp's `timings` columns of a batch.
struct TimingColumns<'a> {
    prompt_n: &'a arrow_array::UInt64Array,
    cache_n: &'a arrow_array::UInt64Array,
    prompt_ms: &'a arrow_array::Float64Array,
    prompt_per_second: &'a arrow_array::Float64Array,
    predicted_n: &'a arrow_array::UInt64Array,
    predicted_ms: &'a arrow_array::Float64Array,
    predicted_per_second: &'a arrow_array::Float64Array,
}

impl<'a> TimingColumns<'a> {
    fn of(c: &Columns<'a>) -> Result<TimingColumns<'a>, RecordError> {
        Ok(TimingColumns {
            prompt_n: c.u64s(columns::TIMINGS_PROMPT_N)?,
            cache_n: c.u64s(columns::TIMINGS_CACHE_N)?,
            prompt_ms: c.f64s(columns::TIMINGS_PROMPT_MS)?,
            prompt_per_second: c.f64s(columns::TIMINGS_PROMPT_PER_SECOND)?,
            predicted_n: c.u64s(columns::TIMINGS_PREDICTED_N)?,
            predicted_ms: c.f64s(columns::TIMINGS_PREDICTED_MS)?,
            predicted_per_second: c.f64s(columns::TIMINGS_PREDICTED_PER_SECOND)?,
        })
    }

    /// Row `i`'s timings; none when every field is null.
    fn row(&self, i: usize) -> Option<ServerTimings> {
        let timings = ServerTimings {
            prompt_n: opt(self.prompt_n, i),
            cache_n: opt(self.cache_n, i),
            prompt_ms: opt(self.prompt_ms, i),
            prompt_per_second: opt(self.prompt_per_second, i),
            predicted_n: opt(self.predicted_n, i),
            predicted_ms: opt(self.predicted_ms, i),
            predicted_per_second: opt(self.predicted_per_second, i),
        };
        (timings != ServerTimings::default()).then_some(timings)
    }
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

/// Row `i` of a conformed custom column, `None` when null.
fn custom_value(col: &ArrayRef, i: usize) -> Option<CustomValue> {
    if col.is_null(i) {
        return None;
    }
    Some(match col.data_type() {
        DataType::Int64 => {
            CustomValue::Int64(col.as_primitive::<arrow_array::types::Int64Type>().value(i))
        }
        DataType::Float64 => CustomValue::Float64(col.as_primitive::<Float64Type>().value(i)),
        DataType::Boolean => CustomValue::Boolean(col.as_boolean().value(i)),
        _ => CustomValue::Utf8(col.as_string::<i32>().value(i).to_string()),
    })
}

/// Converts one batch back into records, checking every column's type.
///
/// `source` names the file in error messages; `first_row` is the index of the
/// batch's first row within that file.
pub(crate) fn batch_to_records(
    batch: &RecordBatch,
    source: &str,
    first_row: usize,
    custom: &[CustomColumn],
    out: &mut Vec<RequestRecord>,
) -> Result<(), RecordError> {
    let rows = RowReader::of(batch, source, custom)?;
    out.reserve(batch.num_rows());
    for i in 0..batch.num_rows() {
        let mut record = RequestRecord::default();
        rows.read(i, first_row, &mut record)?;
        out.push(record);
    }
    Ok(())
}

/// Calls `visit` with each row of one batch as a record, in order, reusing
/// `scratch` (its strings and lists keep their allocations from row to row:
/// a fold over a million records allocates nothing per record).
pub(crate) fn visit_batch(
    batch: &RecordBatch,
    source: &str,
    first_row: usize,
    custom: &[CustomColumn],
    scratch: &mut RequestRecord,
    visit: &mut dyn FnMut(&RequestRecord),
) -> Result<(), RecordError> {
    let rows = RowReader::of(batch, source, custom)?;
    for i in 0..batch.num_rows() {
        rows.read(i, first_row, scratch)?;
        visit(scratch);
    }
    Ok(())
}

/// Every column of one conformed batch, typed once, read row by row.
struct RowReader<'a> {
    source: &'a str,
    run_id: &'a arrow_array::StringArray,
    request_index: &'a arrow_array::UInt64Array,
    conversation_id: &'a arrow_array::StringArray,
    turn_index: &'a arrow_array::UInt32Array,
    dataset: &'a arrow_array::StringArray,
    category: &'a arrow_array::StringArray,
    model: &'a arrow_array::StringArray,
    warmup: &'a arrow_array::BooleanArray,
    start: &'a arrow_array::TimestampNanosecondArray,
    end: &'a arrow_array::TimestampNanosecondArray,
    ttft: &'a arrow_array::UInt64Array,
    inter_chunk: &'a arrow_array::ListArray,
    e2e: &'a arrow_array::UInt64Array,
    prompt_sha256: &'a arrow_array::StringArray,
    spec_dropped: &'a arrow_array::StringArray,
    tokens_per_iteration: &'a arrow_array::Float64Array,
    resends: &'a arrow_array::UInt32Array,
    server_index: &'a arrow_array::UInt32Array,
    prompt_tokens: &'a arrow_array::UInt64Array,
    completion_tokens: &'a arrow_array::UInt64Array,
    output_chunks: &'a arrow_array::UInt64Array,
    finish_reason: &'a arrow_array::StringArray,
    http_status: &'a arrow_array::UInt16Array,
    error_kind: &'a arrow_array::StringArray,
    error_message: &'a arrow_array::StringArray,
    output_text: &'a arrow_array::StringArray,
    spec: SpecColumns<'a>,
    timings: TimingColumns<'a>,
    phases: PhaseColumns<'a>,
    // Conformed by `conform_batch`: each holds its kind's Arrow type.
    custom: Vec<(&'a str, &'a ArrayRef)>,
}

impl<'a> RowReader<'a> {
    fn of(
        batch: &'a RecordBatch,
        source: &'a str,
        custom: &'a [CustomColumn],
    ) -> Result<RowReader<'a>, RecordError> {
        let c = Columns { batch, source };
        Ok(RowReader {
            source,
            run_id: c.strings(columns::RUN_ID)?,
            request_index: c.u64s(columns::REQUEST_INDEX)?,
            conversation_id: c.strings(columns::CONVERSATION_ID)?,
            turn_index: c.u32s(columns::TURN_INDEX)?,
            dataset: c.strings(columns::DATASET)?,
            category: c.strings(columns::CATEGORY)?,
            model: c.strings(columns::MODEL)?,
            warmup: c.column(columns::WARMUP)?.as_boolean(),
            start: c
                .column(columns::START_TIME)?
                .as_primitive::<TimestampNanosecondType>(),
            end: c
                .column(columns::END_TIME)?
                .as_primitive::<TimestampNanosecondType>(),
            ttft: c.u64s(columns::TTFT_NS)?,
            inter_chunk: c.lists(columns::INTER_CHUNK_LATENCIES_NS)?,
            e2e: c.u64s(columns::E2E_LATENCY_NS)?,
            prompt_sha256: c.strings(columns::PROMPT_SHA256)?,
            spec_dropped: c.strings(columns::SPEC_DROPPED)?,
            tokens_per_iteration: c.f64s(columns::TOKENS_PER_ITERATION)?,
            resends: c.u32s(columns::RESENDS)?,
            server_index: c.u32s(columns::SERVER_INDEX)?,
            prompt_tokens: c.u64s(columns::PROMPT_TOKENS)?,
            completion_tokens: c.u64s(columns::COMPLETION_TOKENS)?,
            output_chunks: c.u64s(columns::OUTPUT_CHUNKS)?,
            finish_reason: c.strings(columns::FINISH_REASON)?,
            http_status: c.column(columns::HTTP_STATUS)?.as_primitive::<UInt16Type>(),
            error_kind: c.strings(columns::ERROR_KIND)?,
            error_message: c.strings(columns::ERROR_MESSAGE)?,
            output_text: c.strings(columns::OUTPUT_TEXT)?,
            spec: SpecColumns::of(&c)?,
            timings: TimingColumns::of(&c)?,
            phases: PhaseColumns::of(|name| c.column(name))?,
            custom: custom
                .iter()
                .filter_map(|c| Some((c.name(), batch.column_by_name(c.name())?)))
                .collect(),
        })
    }

    /// Overwrites every field of `r` with row `i` (`first_row` + `i` in the
    /// file, for errors), keeping the allocations `r` already has.
    fn read(&self, i: usize, first_row: usize, r: &mut RequestRecord) -> Result<(), RecordError> {
        let invalid = |column: &str, message: String| RecordError::InvalidValue {
            path: self.source.into(),
            row: first_row + i,
            column: column.into(),
            message,
        };
        r.error_kind =
            match self.error_kind.is_valid(i) {
                false => None,
                true => {
                    let name = self.error_kind.value(i);
                    Some(ErrorKind::parse(name).ok_or_else(|| {
                        invalid("error_kind", format!("unknown error kind {name:?}"))
                    })?)
                }
            };
        self.spec.read(i, &invalid, &mut r.spec)?;
        r.server_timings = self.timings.row(i);
        r.http_phases = self.phases.row(i);
        assign(&mut r.run_id, self.run_id.value(i));
        r.request_index = self.request_index.value(i);
        assign(&mut r.conversation_id, self.conversation_id.value(i));
        r.turn_index = self.turn_index.value(i);
        assign(&mut r.dataset, self.dataset.value(i));
        assign_opt(&mut r.category, self.category, i);
        assign(&mut r.model, self.model.value(i));
        r.warmup = self.warmup.value(i);
        r.start_unix_ns = self.start.value(i);
        r.end_unix_ns = self.end.value(i);
        r.ttft_ns = opt(self.ttft, i);
        assign_list::<UInt64Type>(&mut r.inter_chunk_latencies_ns, self.inter_chunk, i);
        r.e2e_latency_ns = self.e2e.value(i);
        r.prompt_tokens = opt(self.prompt_tokens, i);
        r.completion_tokens = opt(self.completion_tokens, i);
        r.output_chunks = self.output_chunks.value(i);
        assign_opt(&mut r.finish_reason, self.finish_reason, i);
        r.http_status = opt(self.http_status, i);
        assign_opt(&mut r.error_message, self.error_message, i);
        assign(&mut r.output_text, self.output_text.value(i));
        assign_opt(&mut r.prompt_sha256, self.prompt_sha256, i);
        assign_opt(&mut r.spec_dropped, self.spec_dropped, i);
        r.tokens_per_iteration = opt(self.tokens_per_iteration, i);
        r.resends = opt(self.resends, i).unwrap_or(0);
        r.server_index = opt(self.server_index, i);
        r.custom.clear();
        for (name, col) in &self.custom {
            if let Some(value) = custom_value(col, i) {
                r.custom.insert(name.to_string(), value);
            }
        }
        Ok(())
    }
}

/// `*to = value`, reusing `to`'s allocation.
fn assign(to: &mut String, value: &str) {
    to.clear();
    to.push_str(value);
}

/// `*to = a[i]` (`None` when null), reusing `to`'s allocation.
fn assign_opt(to: &mut Option<String>, a: &arrow_array::StringArray, i: usize) {
    match (a.is_valid(i), to.as_mut()) {
        (false, _) => *to = None,
        (true, Some(s)) => assign(s, a.value(i)),
        (true, None) => *to = Some(a.value(i).to_string()),
    }
}

/// `*to = a[i]` (empty when null; null items left out), reusing `to`'s
/// allocation.
fn assign_list<T: arrow_array::ArrowPrimitiveType>(
    to: &mut Vec<T::Native>,
    a: &arrow_array::ListArray,
    i: usize,
) {
    to.clear();
    if a.is_null(i) {
        return;
    }
    // Straight from the offsets: `a.value(i)` would allocate a sliced
    // array per row.
    let offsets = a.value_offsets();
    let (start, end) = (offsets[i] as usize, offsets[i + 1] as usize);
    let values = a.values().as_primitive::<T>();
    match values.nulls() {
        None => to.extend_from_slice(&values.values()[start..end]),
        Some(_) => to.extend((start..end).filter_map(|j| opt(values, j))),
    }
}
