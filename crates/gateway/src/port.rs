//! The domain's upstream port (`gc_domain::runs::ChatUpstream`), implemented over one
//! [`RegionGateway`] per configured region.

use std::collections::HashMap;
use std::future::Future;

use bytes::Bytes;
use gc_domain::runs::{
    ChatAnswer, ChatUpstream, RunEnd, RunKind, RunReport as DomainReport, TokenUsage,
    UpstreamFailure,
};
use gc_domain::secret::SecretString;
use gc_domain::values::Region;
use serde_json::{Map, Value};

use crate::{ChatOutcome, RegionGateway, RunReport, RunStatus, RunStream, Secret, UpstreamError};

/// The configured region gateways.
#[derive(Clone, Default)]
pub struct Gateways {
    regions: HashMap<Region, RegionGateway>,
}

impl Gateways {
    pub fn new(regions: HashMap<Region, RegionGateway>) -> Self {
        Self { regions }
    }

    /// The gateway of a region, if its URL is configured.
    pub fn region(&self, region: Region) -> Option<&RegionGateway> {
        self.regions.get(&region)
    }
}

/// The domain's report of a gateway report.
pub fn domain_report(r: &RunReport) -> DomainReport {
    DomainReport {
        end: match r.status {
            RunStatus::Ok => RunEnd::Ok,
            RunStatus::Error => RunEnd::Error,
            RunStatus::Cancelled => RunEnd::Cancelled,
        },
        model: r.model.clone(),
        latency_ms: r.latency_ms,
        ttft_ms: r.ttft_ms,
        usage: r.usage.map(|u| TokenUsage {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
            total_tokens: u.total_tokens,
        }),
        error_code: r.error_code.clone(),
        relayed_tokens: r.relayed_tokens,
    }
}

/// The domain's reading of an upstream failure: only a 401 proves the key bad.
pub fn failure(e: &UpstreamError) -> UpstreamFailure {
    match e {
        UpstreamError::KeyRejected { .. } => UpstreamFailure::KeyRejected,
        UpstreamError::Timeout => UpstreamFailure::Timeout,
        UpstreamError::Status { status, .. } if (400..500).contains(status) => {
            UpstreamFailure::Refused {
                status: *status,
                message: e.to_string(),
                retry_after_secs: e.retry_after_secs(),
            }
        }
        _ => UpstreamFailure::Failed {
            message: e.to_string(),
            retryable: e.is_retryable(),
        },
    }
}

impl ChatUpstream for Gateways {
    type Body = Bytes;
    type Stream = RunStream;

    fn configured(&self, region: Region) -> bool {
        self.regions.contains_key(&region)
    }

    fn chat(
        &self,
        region: Region,
        key: &SecretString,
        body: Map<String, Value>,
    ) -> impl Future<Output = Result<ChatAnswer<Bytes, RunStream>, UpstreamFailure>> + Send {
        self.call(RunKind::Chat, region, key, body)
    }

    fn call(
        &self,
        kind: RunKind,
        region: Region,
        key: &SecretString,
        body: Map<String, Value>,
    ) -> impl Future<Output = Result<ChatAnswer<Bytes, RunStream>, UpstreamFailure>> + Send {
        let gateway = self.regions.get(&region).cloned();
        let secret = Secret::new(key.expose());
        async move {
            let Some(gateway) = gateway else {
                return Err(UpstreamFailure::Failed {
                    message: format!("the {} gateway is not configured", region.as_str()),
                    retryable: false,
                });
            };
            match gateway.call(kind, &secret, Value::Object(body)).await {
                Ok(ChatOutcome::Complete(done)) => {
                    let report = domain_report(&done.report());
                    Ok(ChatAnswer::Complete {
                        body: done.body,
                        report,
                    })
                }
                Ok(ChatOutcome::Stream(s)) => Ok(ChatAnswer::Stream(s)),
                Err(e) => Err(failure(&e)),
            }
        }
    }

    fn models(&self, region: Region) -> Vec<String> {
        self.regions
            .get(&region)
            .map(|g| g.models().to_vec())
            .unwrap_or_default()
    }

    /// 100 to 300 ms: long enough for a restarting upstream instance to be skipped by its load
    /// balancer, short enough to stay well inside any client's time-out.
    fn backoff(&self) -> impl Future<Output = ()> + Send {
        let jitter = rand::random_range(0..200u64);
        tokio::time::sleep(std::time::Duration::from_millis(100 + jitter))
    }

    fn on_finish(
        &self,
        mut stream: RunStream,
        count_relayed: bool,
        done: Box<dyn FnOnce(DomainReport) + Send>,
    ) -> RunStream {
        if count_relayed {
            stream.count_relayed();
        }
        stream.with_on_finish(move |report| done(domain_report(&report)))
    }

    fn count_tokens(&self, model: &str, text: &str) -> u64 {
        crate::tokens::count(model, text)
    }
}
