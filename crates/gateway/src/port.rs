//! The domain's upstream port (`gc_domain::policy::runs::ChatUpstream`), implemented over one
//! [`RegionGateway`] per configured region.

use std::collections::HashMap;
use std::future::Future;

use bytes::Bytes;
use gc_domain::policy::runs::{
    ChatAnswer, ChatUpstream, RunEnd, RunKind, RunReport as DomainReport, TokenUsage,
    UpstreamFailure,
};
use gc_domain::secret::SecretString;
use gc_domain::values::Region;
use serde_json::{Map, Value};

use crate::{ChatOutcome, RegionGateway, RunReport, RunStatus, RunStream, UpstreamError};

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

    /// The model whose encoding counts a run's text: `auto` (or no model) is sent as the
    /// region's default model, so it is counted as that model when every configured region's
    /// default has the same encoding (else as named: `cl100k_base`).
    fn counted_model<'a>(&'a self, model: &'a str) -> &'a str {
        if !(model.trim().is_empty() || model == "auto") {
            return model;
        }
        let mut defaults = self.regions.values().map(RegionGateway::default_model);
        match defaults.next() {
            Some(first) => {
                let encoding = crate::tokens::Encoding::of(first);
                if defaults.all(|d| crate::tokens::Encoding::of(d) == encoding) {
                    first
                } else {
                    model
                }
            }
            None => model,
        }
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
        let secret = key.clone();
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
        crate::tokens::count(self.counted_model(model), text)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::GatewayConfig;

    fn gateways(defaults: &[(Region, &str)]) -> Gateways {
        Gateways::new(
            defaults
                .iter()
                .map(|(region, model)| {
                    let gateway = RegionGateway::new(GatewayConfig {
                        base_url: "http://127.0.0.1:9/v1".into(),
                        default_model: (*model).into(),
                        timeout: Duration::from_secs(1),
                        connect_timeout: Duration::from_secs(1),
                        models: Vec::new(),
                    })
                    .expect("gateway");
                    (*region, gateway)
                })
                .collect(),
        )
    }

    #[test]
    fn auto_is_counted_as_the_default_model_it_is_sent_as() {
        // Text the two encodings count differently.
        let text = "東京は日本の首都です。人工知能の研究が進んでいる。ひらがなとカタカナ。";
        let (o200k, cl100k) = (
            crate::tokens::count("gpt-4o", text),
            crate::tokens::count("gpt-4", text),
        );
        assert_ne!(o200k, cl100k);
        let one = gateways(&[(Region::Aihk, "gpt-4o-mini")]);
        for model in ["auto", "", " "] {
            assert_eq!(one.count_tokens(model, text), o200k, "{model:?}");
        }
        assert_eq!(
            one.count_tokens("gpt-4", text),
            cl100k,
            "a named model as named"
        );
        let agreeing = gateways(&[(Region::Aihk, "gpt-4o"), (Region::Aica, "gpt-4.1")]);
        assert_eq!(agreeing.count_tokens("auto", text), o200k);
        // Regions whose defaults differ: `auto` cannot say which, and counts as named.
        let split = gateways(&[(Region::Aihk, "gpt-4o"), (Region::Aica, "gpt-4")]);
        assert_eq!(split.count_tokens("auto", text), cl100k);
        assert_eq!(Gateways::default().count_tokens("auto", text), cl100k);
    }
}
