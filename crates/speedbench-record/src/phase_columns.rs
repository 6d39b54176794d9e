//! The HTTP phase columns of a records file ([`HttpPhases`] flattened under
//! `http_`): their builders and their reader.

use arrow_array::ArrayRef;
use arrow_array::builder::{BooleanBuilder, UInt64Builder};
use std::sync::Arc;

use crate::columns;
use crate::error::RecordError;
use crate::record::HttpPhases;

/// The phases' durations and counts as stored, in [`columns::HTTP_PHASES`]
/// order but for `http_connection_reused` (the seventh column).
fn numbers(p: &HttpPhases) -> [u64; 10] {
    [
        p.blocked_ns,
        p.dns_lookup_ns,
        p.connecting_ns,
        p.sending_ns,
        p.waiting_ns,
        p.receiving_ns,
        p.bytes_sent,
        p.bytes_received,
        p.chunks_sent,
        p.chunks_received,
    ]
}

/// Where `http_connection_reused` sits among [`columns::HTTP_PHASES`].
const REUSED_AT: usize = 6;

/// Builders of the phase columns.
#[derive(Default)]
pub(crate) struct PhaseBuilders {
    numbers: [UInt64Builder; 10],
    reused: BooleanBuilder,
}

impl PhaseBuilders {
    pub(crate) fn push(&mut self, phases: Option<&HttpPhases>) {
        match phases {
            Some(p) => {
                for (builder, value) in self.numbers.iter_mut().zip(numbers(p)) {
                    builder.append_value(value);
                }
                self.reused.append_value(p.connection_reused);
            }
            None => {
                self.numbers.iter_mut().for_each(UInt64Builder::append_null);
                self.reused.append_null();
            }
        }
    }

    /// The finished columns, in schema order.
    pub(crate) fn finish(&mut self) -> impl Iterator<Item = ArrayRef> + '_ {
        let mut numbers = self
            .numbers
            .iter_mut()
            .map(|b| Arc::new(b.finish()) as ArrayRef);
        let mut out: Vec<ArrayRef> = numbers.by_ref().take(REUSED_AT).collect();
        out.push(Arc::new(self.reused.finish()));
        out.extend(numbers);
        out.into_iter()
    }
}

/// The phase columns of one batch.
pub(crate) struct PhaseColumns<'a> {
    numbers: [&'a arrow_array::UInt64Array; 10],
    reused: &'a arrow_array::BooleanArray,
}

impl<'a> PhaseColumns<'a> {
    /// The columns, each looked up by `column` (which conforms their type).
    pub(crate) fn of(
        column: impl Fn(&str) -> Result<&'a ArrayRef, RecordError>,
    ) -> Result<PhaseColumns<'a>, RecordError> {
        use arrow_array::cast::AsArray;
        use arrow_array::types::UInt64Type;
        let mut numbers = Vec::with_capacity(10);
        for (i, name) in columns::HTTP_PHASES.iter().enumerate() {
            if i != REUSED_AT {
                numbers.push(column(name)?.as_primitive::<UInt64Type>());
            }
        }
        let reused = column(columns::HTTP_CONNECTION_REUSED)?.as_boolean();
        let numbers = numbers
            .try_into()
            .unwrap_or_else(|_| unreachable!("ten numeric phase columns"));
        Ok(PhaseColumns { numbers, reused })
    }

    /// Row `i`'s phases: none when `http_connection_reused` is null (a
    /// request with no phases, or a file written before they existed).
    pub(crate) fn row(&self, i: usize) -> Option<HttpPhases> {
        use arrow_array::Array;
        if !self.reused.is_valid(i) {
            return None;
        }
        let n = |k: usize| {
            let col = self.numbers[k];
            if col.is_valid(i) { col.value(i) } else { 0 }
        };
        Some(HttpPhases {
            blocked_ns: n(0),
            dns_lookup_ns: n(1),
            connecting_ns: n(2),
            sending_ns: n(3),
            waiting_ns: n(4),
            receiving_ns: n(5),
            connection_reused: self.reused.value(i),
            bytes_sent: n(6),
            bytes_received: n(7),
            chunks_sent: n(8),
            chunks_received: n(9),
        })
    }
}
