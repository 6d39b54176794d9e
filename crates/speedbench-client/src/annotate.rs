//! Caller-defined columns filled in as records are written.

use speedbench_record::{CustomColumn, RequestRecord};

/// Adds caller-defined values to every record of a run, in custom columns
/// it declares (see [`speedbench_record::custom`]).
///
/// Registered with [`ProfileRun::with_annotator`](crate::ProfileRun::with_annotator),
/// an annotator sees each finished record on the thread that writes
/// `records.parquet`, before the record reaches the file and the
/// [`RecordSink`](crate::RecordSink)s, so its work costs the request path
/// nothing. A value it sets for a column it did not declare, or of another
/// kind, fails the run with an error naming the row and the column.
///
/// ```
/// use speedbench_client::RecordAnnotator;
/// use speedbench_record::{CustomColumn, CustomKind, CustomValue, RequestRecord};
///
/// /// The output length bucket of each request, for grouping later.
/// struct LengthBucket;
///
/// impl RecordAnnotator for LengthBucket {
///     fn columns(&self) -> Vec<CustomColumn> {
///         vec![CustomColumn::new("x_length_bucket", CustomKind::Utf8).unwrap()]
///     }
///
///     fn annotate(&mut self, record: &mut RequestRecord) {
///         let bucket = match record.completion_tokens {
///             Some(n) if n >= 256 => "long",
///             Some(_) => "short",
///             None => return, // left null
///         };
///         record
///             .custom
///             .insert("x_length_bucket".into(), CustomValue::Utf8(bucket.into()));
///     }
/// }
///
/// let mut annotator = LengthBucket;
/// let mut record = RequestRecord { completion_tokens: Some(300), ..Default::default() };
/// annotator.annotate(&mut record);
/// assert_eq!(record.custom["x_length_bucket"], CustomValue::Utf8("long".into()));
/// ```
pub trait RecordAnnotator: Send {
    /// The columns this annotator fills (names unique across a run's
    /// annotators).
    fn columns(&self) -> Vec<CustomColumn>;

    /// Sets this annotator's values on `record` (in `record.custom`).
    fn annotate(&mut self, record: &mut RequestRecord);
}

/// A boxed annotator is an annotator (as a boxed [`crate::RecordSink`] is
/// a sink).
impl<A: RecordAnnotator + ?Sized> RecordAnnotator for Box<A> {
    fn columns(&self) -> Vec<CustomColumn> {
        (**self).columns()
    }
    fn annotate(&mut self, record: &mut RequestRecord) {
        (**self).annotate(record)
    }
}
