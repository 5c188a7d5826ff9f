//! How a producer reports outcomes: every record sent carries a token (anything `Send`), and
//! the producer's handler gets the tokens back a batch at a time with the batch's outcome, so
//! each record's outcome is reported exactly once, at the cost of one call per batch.
//!
//! [`super::Producer::new`] uses per-record callbacks as tokens ([`DeliveryCallback`], called
//! one by one); a caller that sends millions of records (the bench) uses a small value as its
//! token and handles a whole batch at once ([`super::Producer::with_handler`]).

use std::sync::Arc;

use super::error::ClientError;

/// Where a record was stored. With acks=0 the offset is unknown (-1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordMetadata {
    pub partition: i32,
    pub offset: i64,
}

/// A record's outcome; the error is shared by the records of a batch.
pub type DeliveryResult = Result<RecordMetadata, Arc<ClientError>>;
/// A per-record callback (the token of [`super::Producer::new`]'s producers).
pub type DeliveryCallback = Box<dyn FnOnce(DeliveryResult) + Send>;
/// Called with every completed batch (on a client thread: keep it short).
pub type DeliveryHandler<T> = Box<dyn Fn(Delivered<T>) + Send + Sync>;

/// The outcome of one batch: its records' tokens, in offset order.
pub struct Delivered<T> {
    pub partition: i32,
    /// The first record's offset (-1 when unknown, with acks=0), or why the batch failed.
    pub outcome: Result<i64, Arc<ClientError>>,
    pub tokens: Vec<T>,
}

impl<T> Delivered<T> {
    /// The outcome of the record at `index` in the batch.
    pub fn result(&self, index: usize) -> DeliveryResult {
        match &self.outcome {
            Ok(base) => Ok(RecordMetadata {
                partition: self.partition,
                offset: if *base >= 0 { base + index as i64 } else { -1 },
            }),
            Err(e) => Err(e.clone()),
        }
    }

    /// Each record's token with its outcome.
    pub fn into_records(self) -> impl Iterator<Item = (T, DeliveryResult)> {
        let Delivered {
            partition,
            outcome,
            tokens,
        } = self;
        let head: Delivered<()> = Delivered {
            partition,
            outcome,
            tokens: Vec::new(),
        };
        tokens
            .into_iter()
            .enumerate()
            .map(move |(i, token)| (token, head.result(i)))
    }
}

/// The handler of per-record callbacks: calls each in offset order.
pub fn call_each(batch: Delivered<DeliveryCallback>) {
    for (callback, result) in batch.into_records() {
        callback(result);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_follow_the_base_and_errors_are_shared() {
        let ok = Delivered {
            partition: 3,
            outcome: Ok(10),
            tokens: vec!['a', 'b'],
        };
        let got: Vec<(char, Option<RecordMetadata>)> =
            ok.into_records().map(|(t, r)| (t, r.ok())).collect();
        let at = |offset| {
            Some(RecordMetadata {
                partition: 3,
                offset,
            })
        };
        assert_eq!(got, vec![('a', at(10)), ('b', at(11))]);
        let unknown = Delivered {
            partition: 0,
            outcome: Ok(-1),
            tokens: vec![()],
        };
        assert_eq!(unknown.result(0).ok().map(|m| m.offset), Some(-1));
        let failed = Delivered::<()> {
            partition: 0,
            outcome: Err(Arc::new(ClientError::Closed)),
            tokens: vec![(), ()],
        };
        assert_eq!(failed.into_records().filter(|(_, r)| r.is_err()).count(), 2);
    }
}
