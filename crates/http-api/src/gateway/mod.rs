//! The AI gateway routes: `POST /run` and, when enabled, `POST /chat/completions`.

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use actix_web::HttpMessage;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use gc_domain::model::workspace::NewActivity;
use gc_domain::policy::runs::{RunEvent, RunSink, RunSlot};
use prometheus_client::metrics::counter::Counter;
use tokio::sync::mpsc;

use crate::middleware::OpenAiErrors;

pub mod models;
pub mod run;

/// Hands run records to a background writer through a bounded queue, off the request path
/// (decisions 0003 and 0033).
///
/// A run's record is never dropped: before the run is admitted it takes a place in the queue
/// ([`RunSink::reserve`], a tokio `OwnedPermit`) and sends its record through it when it ends,
/// however long that takes. With no place free the run is refused with 503 `busy` and
/// `Retry-After: 1` before its quotas are counted: while the writer is behind (a slow or
/// unavailable database), callers are held back instead of their records being lost. Streams
/// hold their place for their whole duration, so together they may hold at most half of the
/// places ([`RunRecorder::stream_share`]): past that a stream is refused, and short runs
/// always find the other half.
///
/// Entries that are not a run's record — key verdicts (at most one per key and 401) and the
/// Guard's activity lines — are sent without a place (`RunSink::send`): when the queue is full
/// they are dropped with a warning and counted (`gc_run_records_dropped_total`). A dropped
/// verdict leaves the key `ready`; its next 401 judges it again.
#[derive(Clone)]
pub struct RunRecorder {
    tx: mpsc::Sender<RunEvent>,
    /// Places held by streams now (taken and not yet sent or dropped).
    streams: Arc<AtomicUsize>,
    /// Counts entries dropped for want of room (`gc_run_records_dropped_total`), once the
    /// metrics are there.
    dropped: Arc<OnceLock<Counter>>,
}

impl RunRecorder {
    /// A recorder and the receiving end for the writer task (see `gc-server`).
    pub fn channel(capacity: usize) -> (Self, mpsc::Receiver<RunEvent>) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        (
            Self {
                tx,
                streams: Arc::default(),
                dropped: Arc::default(),
            },
            rx,
        )
    }

    pub fn record(&self, activity: NewActivity) {
        self.send(RunEvent::Activity(activity));
    }

    /// Where this recorder (and every clone of it) counts the entries it drops.
    pub fn count_drops_in(&self, counter: Counter) {
        let _ = self.dropped.set(counter);
    }

    /// Sends an entry without a place; false (a warning, and a count) when it was dropped
    /// because the queue is full or the writer has stopped.
    pub fn try_send(&self, event: RunEvent) -> bool {
        match self.tx.try_send(event) {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(reason = %e, "run writer entry dropped (key verdict or activity line): the queue is full or closed");
                if let Some(counter) = self.dropped.get() {
                    counter.inc();
                }
                false
            }
        }
    }

    /// Places taken: records waiting for the writer and places held by runs in flight.
    pub fn depth(&self) -> usize {
        self.tx.max_capacity().saturating_sub(self.tx.capacity())
    }

    /// Entries the queue holds at most.
    pub fn capacity(&self) -> usize {
        self.tx.max_capacity()
    }

    /// Places streams may hold at once: half of the queue (at least one).
    pub fn stream_share(&self) -> usize {
        (self.tx.max_capacity() / 2).max(1)
    }

    /// True once the writer has stopped (its end of the queue is gone): nothing sent is
    /// written any more.
    pub fn writer_stopped(&self) -> bool {
        self.tx.is_closed()
    }
}

/// A stream's hold on its share, given back when its slot is used or dropped.
struct StreamHold(Arc<AtomicUsize>);

impl Drop for StreamHold {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl RunSink for RunRecorder {
    fn send(&self, event: RunEvent) {
        self.try_send(event);
    }

    fn reserve(&self, stream: bool) -> Option<RunSlot> {
        let hold = if stream {
            let share = self.stream_share();
            self.streams
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                    (n < share).then_some(n + 1)
                })
                .ok()?;
            Some(StreamHold(Arc::clone(&self.streams)))
        } else {
            None
        };
        // A failure drops `hold`, giving the stream's share back.
        let permit = self.tx.clone().try_reserve_owned().ok()?;
        Some(RunSlot::new(move |event| {
            permit.send(event);
            drop(hold);
        }))
    }
}

pub(crate) async fn openai_errors(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    req.extensions_mut().insert(OpenAiErrors);
    next.call(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_place_is_kept_for_each_admitted_run_and_streams_keep_half() {
        let (recorder, _rx) = RunRecorder::channel(4);
        let a = recorder.reserve(true).unwrap();
        let b = recorder.reserve(true).unwrap();
        assert!(recorder.reserve(true).is_none(), "streams hold half");
        let c = recorder.reserve(false).unwrap();
        let d = recorder.reserve(false).unwrap();
        assert!(recorder.reserve(false).is_none(), "every place is taken");
        assert_eq!(recorder.depth(), 4);
        // A slot dropped unused frees its place, and a stream's its share.
        drop(c);
        assert_eq!(recorder.depth(), 3);
        drop(a);
        let e = recorder.reserve(true).unwrap();
        assert!(
            recorder.reserve(true).is_none(),
            "b and e hold the streams' half"
        );
        let f = recorder.reserve(false).unwrap();
        assert!(recorder.reserve(false).is_none());
        drop((b, d, e, f));
        assert_eq!(recorder.depth(), 0);
        let _x = recorder.reserve(true).unwrap();
        let _y = recorder.reserve(true).unwrap();
        assert!(recorder.reserve(true).is_none());
        assert!(recorder.reserve(false).is_some());
    }
}
