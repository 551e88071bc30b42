//! The AI gateways' diagnostics (administration): checks each region's gateway, re-checks the
//! keys and stores the statuses found.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::ai_keys::{check_key, CheckedKey, GatewayCheck, KeyPorts, KeyProbe};
use super::Storage;
use crate::error::DomainResult;
use crate::policy::access::AdminAuthority;
use crate::policy::ai_access::AiKeyStatus;
use crate::services::admin::{self, KeyToCheck};
use crate::values::Region;

/// What to diagnose: every region and every tenant unless narrowed.
#[derive(Debug, Clone, Default)]
pub struct DiagnosisRequest {
    /// Only this region (`AIHK` or `AICA`).
    pub region: Option<String>,
    /// Only this tenant's keys.
    pub tenant_id: Option<Uuid>,
}

/// One region's gateway as checked now: what its check answered, `None` when the region has no
/// gateway. The fields an administrator reads are derived from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayDiagnosis {
    pub region: Region,
    pub check: Option<GatewayCheck>,
}

impl GatewayDiagnosis {
    pub fn configured(&self) -> bool {
        self.check.is_some()
    }

    pub fn reachable(&self) -> bool {
        self.check.as_ref().is_some_and(|c| c.reachable)
    }

    pub fn status_code(&self) -> Option<u16> {
        self.check.as_ref().and_then(|c| c.status_code)
    }

    pub fn latency_ms(&self) -> Option<u64> {
        self.check.as_ref().map(|c| c.latency_ms)
    }

    /// Why it is not reachable (or not configured); `None` when it is.
    pub fn error(&self) -> Option<String> {
        match &self.check {
            None => Some("not configured".into()),
            Some(c) if c.reachable => None,
            Some(c) => c.reason.clone(),
        }
    }
}

/// The gateways, then the keys, in the order checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnosis {
    pub gateways: Vec<GatewayDiagnosis>,
    pub keys: Vec<CheckedKey>,
}

/// Checks each wanted region's gateway, then re-checks the wanted keys (one storage trip reads
/// and opens them, checking the admin), and stores every key's new status (a second trip). A
/// key that does not open with the current master key is `not_ready` without a probe.
pub async fn diagnose<A: AdminAuthority + Send + 'static>(
    ports: impl KeyPorts,
    admin: A,
    request: DiagnosisRequest,
    now: DateTime<Utc>,
) -> DomainResult<Diagnosis> {
    let (db, probe, sealer) = (ports.db(), ports.probe(), ports.sealer());
    // No gateway is probed for a caller who may not see the answer.
    admin.admin_scope()?;
    let only = request
        .region
        .as_deref()
        .map(|r| Region::parse("region", r))
        .transpose()?;
    let regions: Vec<Region> = Region::ALL
        .into_iter()
        .filter(|r| only.is_none_or(|o| o == *r))
        .collect();

    let mut gateways = Vec::with_capacity(regions.len());
    for region in &regions {
        gateways.push(GatewayDiagnosis {
            region: *region,
            check: probe.check_gateway(*region).await,
        });
    }

    let tenant = request.tenant_id;
    let (scope, keys) = db
        .run(move |store| admin::keys_to_diagnose(store, sealer.as_ref(), &admin, tenant, &regions))
        .await?;
    let mut results = Vec::with_capacity(keys.len());
    for KeyToCheck { key, secret } in keys {
        let (status, reason) = match secret {
            Some(secret) => check_key(probe, key.region, &secret).await,
            None => (
                AiKeyStatus::NotReady,
                Some("the key cannot be decrypted with the current master key".to_owned()),
            ),
        };
        results.push((key, status, reason));
    }
    let keys = results
        .iter()
        .map(|(key, status, reason)| CheckedKey::new(key, *status, reason.clone()))
        .collect();
    db.run(move |store| admin::record_diagnosis(store, &scope, &results, now))
        .await?;
    Ok(Diagnosis { gateways, keys })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::fakes::{ready, Fake, FakeProbe, FakeSealer};
    use crate::model::{Role, Status};
    use crate::policy::access::tests::{session, tenant, user};
    use crate::policy::access::Principal;
    use crate::policy::ai_access::tests::key;
    use crate::ports::KeySealer;
    use crate::services::ai_keys::KeyProbeAnswer;

    fn ports<'a>(store: &'a Fake, probe: &'a FakeProbe) -> impl KeyPorts + 'a {
        let sealer: Arc<dyn KeySealer> = Arc::new(FakeSealer);
        (store, probe, sealer)
    }

    fn admin() -> Principal {
        session(user(Role::PlatformAdmin, Status::Active, None), None, None)
    }

    /// AIHK's gateway answers 200 and accepts `sk-good`; AICA's cannot be reached.
    fn gateways() -> FakeProbe {
        FakeProbe {
            gateways: [
                (
                    Region::Aihk,
                    GatewayCheck {
                        reachable: true,
                        status_code: Some(200),
                        latency_ms: 7,
                        reason: Some("ignored when reachable".into()),
                    },
                ),
                (
                    Region::Aica,
                    GatewayCheck {
                        reachable: false,
                        status_code: None,
                        latency_ms: 2000,
                        reason: Some("connection refused".into()),
                    },
                ),
            ]
            .into(),
            keys: [(
                "sk-good".to_owned(),
                KeyProbeAnswer {
                    accepted: true,
                    reason: None,
                },
            )]
            .into(),
            ..FakeProbe::default()
        }
    }

    fn sealed(
        mut k: crate::policy::ai_access::TenantAiKey,
        secret: &str,
    ) -> crate::policy::ai_access::TenantAiKey {
        k.sealed_secret = format!("sealed:{secret}");
        k
    }

    #[test]
    fn gateways_and_keys_are_checked_and_the_statuses_stored() {
        let t = tenant(Status::Active);
        let good = sealed(
            key(&t, Region::Aihk, true, AiKeyStatus::NotReady),
            "sk-good",
        );
        let refused = sealed(key(&t, Region::Aica, true, AiKeyStatus::Ready), "sk-other");
        // Sealed under another master key: it does not open.
        let lost = key(&t, Region::Aihk, true, AiKeyStatus::Ready);
        let store = Fake::with_keys(vec![good.clone(), refused.clone(), lost.clone()]);
        let probe = gateways();
        let got = ready(diagnose(
            ports(&store, &probe),
            admin(),
            DiagnosisRequest::default(),
            Utc::now(),
        ))
        .unwrap();
        // The fields an administrator reads, as the checks mean them (a reachable gateway's
        // reason is not an error).
        let shown: Vec<_> = got
            .gateways
            .iter()
            .map(|g| {
                (
                    g.region,
                    g.configured(),
                    g.reachable(),
                    g.status_code(),
                    g.latency_ms(),
                    g.error(),
                )
            })
            .collect();
        assert_eq!(
            shown,
            vec![
                (Region::Aihk, true, true, Some(200), Some(7), None),
                (
                    Region::Aica,
                    true,
                    false,
                    None,
                    Some(2000),
                    Some("connection refused".into())
                ),
            ]
        );
        let statuses: Vec<_> = got
            .keys
            .iter()
            .map(|k| (k.id, k.status, k.status_reason.clone()))
            .collect();
        assert_eq!(
            statuses,
            vec![
                (good.id, AiKeyStatus::Ready, None),
                (
                    refused.id,
                    AiKeyStatus::NotReady,
                    Some("the gateway did not accept the key".into())
                ),
                (
                    lost.id,
                    AiKeyStatus::NotReady,
                    Some("the key cannot be decrypted with the current master key".into())
                ),
            ]
        );
        // The key that does not open is not probed; every status found is stored.
        assert_eq!(probe.probed.lock().unwrap().len(), 2);
        let stored: Vec<_> = store
            .verdicts
            .lock()
            .unwrap()
            .iter()
            .map(|v| (v.key_id(), v.status(), v.reason().map(str::to_owned)))
            .collect();
        assert_eq!(stored, statuses);
    }

    #[test]
    fn a_region_or_a_tenant_narrows_the_diagnosis() {
        let t = tenant(Status::Active);
        let other = tenant(Status::Active);
        let hk = sealed(key(&t, Region::Aihk, true, AiKeyStatus::Ready), "sk-good");
        let ca = sealed(key(&t, Region::Aica, true, AiKeyStatus::Ready), "sk-good");
        let theirs = sealed(
            key(&other, Region::Aihk, true, AiKeyStatus::Ready),
            "sk-good",
        );
        let store = Fake::with_keys(vec![hk.clone(), ca, theirs]);
        let probe = FakeProbe::default();
        let got = ready(diagnose(
            ports(&store, &probe),
            admin(),
            DiagnosisRequest {
                region: Some("AIHK".into()),
                tenant_id: Some(t.id),
            },
            Utc::now(),
        ))
        .unwrap();
        assert_eq!(*probe.checked.lock().unwrap(), vec![Region::Aihk]);
        assert_eq!(got.gateways.len(), 1);
        let unconfigured = &got.gateways[0];
        assert!(!unconfigured.configured() && !unconfigured.reachable());
        assert_eq!(
            (unconfigured.status_code(), unconfigured.latency_ms()),
            (None, None)
        );
        assert_eq!(unconfigured.error().as_deref(), Some("not configured"));
        assert_eq!(got.keys.len(), 1);
        assert_eq!(got.keys[0].id, hk.id);
        assert_eq!(
            got.keys[0].status_reason.as_deref(),
            Some("the AIHK gateway is not configured")
        );
    }

    #[test]
    fn a_refused_diagnosis_checks_and_stores_nothing() {
        let t = tenant(Status::Active);
        let store = Fake::with_keys(vec![sealed(
            key(&t, Region::Aihk, true, AiKeyStatus::Ready),
            "sk-good",
        )]);
        let member = session(
            user(Role::Member, Status::Active, Some(&t)),
            Some(t.clone()),
            None,
        );
        let probe = gateways();
        for (caller, region, code) in [
            (member, None, "admin_required"),
            (admin(), Some("EU"), "validation_failed"),
        ] {
            let err = ready(diagnose(
                ports(&store, &probe),
                caller,
                DiagnosisRequest {
                    region: region.map(str::to_owned),
                    tenant_id: None,
                },
                Utc::now(),
            ))
            .unwrap_err();
            assert_eq!(err.code().as_str(), code);
        }
        assert!(probe.checked.lock().unwrap().is_empty());
        assert!(probe.probed.lock().unwrap().is_empty());
        assert!(store.verdicts.lock().unwrap().is_empty());
    }
}
