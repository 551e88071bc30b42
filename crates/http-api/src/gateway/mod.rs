//! The AI gateway routes: `POST /run` and, when enabled, `POST /chat/completions`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::{from_fn, Next};
use actix_web::{web, HttpMessage};
use gc_auth::Sealer;
use gc_domain::values::Region;
use gc_domain::workspace::NewActivity;
use gc_gateway::RegionGateway;
use tokio::sync::mpsc;

use crate::middleware::OpenAiErrors;

pub mod run;

/// The configured region gateways and the master-key sealer for upstream keys.
pub struct Gateways {
    regions: HashMap<Region, RegionGateway>,
    sealer: Sealer,
    next: AtomicUsize,
}

impl Gateways {
    pub fn new(regions: HashMap<Region, RegionGateway>, sealer: Sealer) -> Self {
        Self {
            regions,
            sealer,
            next: AtomicUsize::new(0),
        }
    }

    /// The gateway of a region, if its URL is configured.
    pub fn region(&self, region: Region) -> Option<&RegionGateway> {
        self.regions.get(&region)
    }

    pub fn sealer(&self) -> &Sealer {
        &self.sealer
    }

    /// A rotating start index, to spread runs over a region's keys.
    pub fn next_start(&self) -> usize {
        self.next.fetch_add(1, Ordering::Relaxed)
    }
}

/// Hands run records to a background writer through a bounded queue, off the request path.
/// A full queue drops the record with a warning rather than slowing runs down.
#[derive(Clone)]
pub struct RunRecorder {
    tx: mpsc::Sender<NewActivity>,
}

impl RunRecorder {
    /// A recorder and the receiving end for the writer task (see `gc-server`).
    pub fn channel(capacity: usize) -> (Self, mpsc::Receiver<NewActivity>) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        (Self { tx }, rx)
    }

    pub fn record(&self, activity: NewActivity) {
        if let Err(e) = self.tx.try_send(activity) {
            tracing::warn!(reason = %e, "run record dropped: the activity queue is full or closed");
        }
    }
}

async fn openai_errors(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    req.extensions_mut().insert(OpenAiErrors);
    next.call(req).await
}

pub fn config(cfg: &mut web::ServiceConfig, chat_completions: bool) {
    cfg.service(web::resource("/run").route(web::post().to(run::run)));
    if chat_completions {
        cfg.service(
            web::resource("/chat/completions")
                .wrap(from_fn(openai_errors))
                .route(web::post().to(run::chat_completions)),
        );
    }
}
