//! The AI gateway routes: `POST /run` and, when enabled, `POST /chat/completions`.

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use actix_web::HttpMessage;
use gc_domain::runs::{RunEvent, RunSink};
use gc_domain::workspace::NewActivity;
use tokio::sync::mpsc;

use crate::middleware::OpenAiErrors;

pub mod models;
pub mod run;

/// Hands run records to a background writer through a bounded queue, off the request path.
/// A full queue drops the record with a warning rather than slowing runs down.
/// Key verdicts travel the same queue: when it is full a verdict is dropped too, and the key is
/// judged again at its next 401.
#[derive(Clone)]
pub struct RunRecorder {
    tx: mpsc::Sender<RunEvent>,
}

impl RunRecorder {
    /// A recorder and the receiving end for the writer task (see `gc-server`).
    pub fn channel(capacity: usize) -> (Self, mpsc::Receiver<RunEvent>) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        (Self { tx }, rx)
    }

    pub fn record(&self, activity: NewActivity) {
        self.send(RunEvent::Activity(activity));
    }

    /// Entries waiting for the writer.
    pub fn depth(&self) -> usize {
        self.tx.max_capacity().saturating_sub(self.tx.capacity())
    }

    /// Entries the queue holds at most.
    pub fn capacity(&self) -> usize {
        self.tx.max_capacity()
    }

    /// True once the writer has stopped (its end of the queue is gone): nothing sent is
    /// written any more.
    pub fn writer_stopped(&self) -> bool {
        self.tx.is_closed()
    }
}

impl RunSink for RunRecorder {
    fn send(&self, event: RunEvent) {
        if let Err(e) = self.tx.try_send(event) {
            tracing::warn!(reason = %e, "run record dropped: the activity queue is full or closed");
        }
    }
}

pub(crate) async fn openai_errors(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    req.extensions_mut().insert(OpenAiErrors);
    next.call(req).await
}
