//! Tenant AI keys (administration): add a key, checked at once against its region's gateway;
//! list; delete. The probe-to-status decision ([`key_status`]) is shared with the diagnostics.

use std::future::Future;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::Storage;
use crate::access::Principal;
use crate::admin;
use crate::error::DomainResult;
use crate::gateway::{AiKeyStatus, TenantAiKey};
use crate::ports::{AiKeyRepo, KeySealer, TenantRepo};
use crate::secret::SecretString;
use crate::values::Region;

/// What a region's gateway answered to a key probe (`GET {base}/models` with the key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyProbeAnswer {
    /// The gateway accepted the key.
    pub accepted: bool,
    /// Why it did not (built by the adapter, never the upstream's text, never the key).
    pub reason: Option<String>,
}

/// What a region's gateway answered to a reachability check (no key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayCheck {
    /// It answered with some HTTP status.
    pub reachable: bool,
    pub status_code: Option<u16>,
    pub latency_ms: u64,
    /// Why it is not reachable.
    pub reason: Option<String>,
}

/// The region gateways' checks. `gc-gateway`'s `Gateways` implements it (through a wrapper in
/// the HTTP layer).
pub trait KeyProbe {
    /// Probes `secret` against `region`'s gateway; `None` when the region has no gateway.
    fn probe_key(
        &self,
        region: Region,
        secret: &SecretString,
    ) -> impl Future<Output = Option<KeyProbeAnswer>>;
    /// Checks that `region`'s gateway answers; `None` when the region has no gateway.
    fn check_gateway(&self, region: Region) -> impl Future<Output = Option<GatewayCheck>>;
}

/// The status a key probe means: `ready` only when the gateway accepted the key; otherwise
/// `not_ready` with the probe's reason, or a reason saying why there was no probe.
pub fn key_status(region: Region, probe: Option<KeyProbeAnswer>) -> (AiKeyStatus, Option<String>) {
    match probe {
        None => (
            AiKeyStatus::NotReady,
            Some(format!("the {} gateway is not configured", region.as_str())),
        ),
        Some(answer) if answer.accepted => (AiKeyStatus::Ready, None),
        Some(answer) => (
            AiKeyStatus::NotReady,
            Some(
                answer
                    .reason
                    .unwrap_or_else(|| "the gateway did not accept the key".into()),
            ),
        ),
    }
}

/// Probes a key and judges it ([`key_status`]).
pub async fn check_key<K: KeyProbe + ?Sized>(
    probe: &K,
    region: Region,
    secret: &SecretString,
) -> (AiKeyStatus, Option<String>) {
    key_status(region, probe.probe_key(region, secret).await)
}

/// A new key as the administrator sent it.
#[derive(Debug, Clone)]
pub struct NewAiKey {
    pub region: String,
    pub secret: String,
    pub label: Option<String>,
    /// Default true.
    pub chat_enabled: Option<bool>,
}

/// Adds an upstream key to a tenant: validated and sealed (one storage trip, which checks the
/// admin and the tenant), probed against its region's gateway, and stored with the status the
/// probe means (a second trip). Nothing is stored when the first trip refuses.
pub async fn create<D, K>(
    db: &D,
    probe: &K,
    sealer: Arc<dyn KeySealer>,
    admin: Principal,
    tenant_id: Uuid,
    key: NewAiKey,
    now: DateTime<Utc>,
) -> DomainResult<TenantAiKey>
where
    D: Storage,
    D::Store: TenantRepo + AiKeyRepo,
    K: KeyProbe + ?Sized,
{
    let plan = db
        .run(move |store| {
            admin::plan_ai_key(
                store,
                sealer.as_ref(),
                &admin,
                tenant_id,
                &key.region,
                &key.secret,
                key.label.as_deref(),
                key.chat_enabled.unwrap_or(true),
                now,
            )
        })
        .await?;
    let (status, reason) = check_key(probe, plan.region(), plan.secret()).await;
    db.run(move |store| admin::store_ai_key(store, plan, status, reason))
        .await
}

/// The tenant's upstream keys (never their secrets).
pub async fn list<D>(db: &D, admin: Principal, tenant_id: Uuid) -> DomainResult<Vec<TenantAiKey>>
where
    D: Storage,
    D::Store: TenantRepo + AiKeyRepo,
{
    db.run(move |store| admin::list_ai_keys(store, &admin, tenant_id))
        .await
}

/// Deletes one of the tenant's upstream keys; `not_found` when there is none.
pub async fn delete<D>(db: &D, admin: Principal, tenant_id: Uuid, key_id: Uuid) -> DomainResult<()>
where
    D: Storage,
    D::Store: AiKeyRepo,
{
    db.run(move |store| admin::delete_ai_key(store, &admin, tenant_id, key_id))
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::tests::{session, tenant, user};
    use crate::fakes::{ready, Fake, FakeProbe, FakeSealer};
    use crate::model::{Role, Status};

    fn admin() -> Principal {
        session(user(Role::PlatformAdmin, Status::Active, None), None, None)
    }

    fn answer(accepted: bool, reason: Option<&str>) -> KeyProbeAnswer {
        KeyProbeAnswer {
            accepted,
            reason: reason.map(str::to_owned),
        }
    }

    /// Gateways in both regions; `sk-good` is accepted, `sk-bad` refused with a reason.
    fn gateways() -> FakeProbe {
        let up = GatewayCheck {
            reachable: true,
            status_code: Some(200),
            latency_ms: 3,
            reason: None,
        };
        FakeProbe {
            gateways: [(Region::Aihk, up.clone()), (Region::Aica, up)].into(),
            keys: [
                ("sk-good".to_owned(), answer(true, Some("403 caveat"))),
                (
                    "sk-bad".to_owned(),
                    answer(false, Some("401 from the gateway")),
                ),
            ]
            .into(),
            ..FakeProbe::default()
        }
    }

    fn new_key(region: &str, secret: &str) -> NewAiKey {
        NewAiKey {
            region: region.into(),
            secret: secret.into(),
            label: Some("main".into()),
            chat_enabled: None,
        }
    }

    #[test]
    fn a_probe_means_ready_only_when_the_gateway_accepted_the_key() {
        assert_eq!(
            key_status(Region::Aica, None),
            (
                AiKeyStatus::NotReady,
                Some("the AICA gateway is not configured".into())
            )
        );
        // A caveat on an accepted key is not a reason to refuse it, nor shown as one.
        assert_eq!(
            key_status(Region::Aihk, Some(answer(true, Some("403 caveat")))),
            (AiKeyStatus::Ready, None)
        );
        assert_eq!(
            key_status(Region::Aihk, Some(answer(false, Some("timeout")))),
            (AiKeyStatus::NotReady, Some("timeout".into()))
        );
        assert_eq!(
            key_status(Region::Aihk, Some(answer(false, None))),
            (
                AiKeyStatus::NotReady,
                Some("the gateway did not accept the key".into())
            )
        );
    }

    #[test]
    fn a_new_key_is_stored_with_the_status_its_probe_means() {
        let store = Fake::default();
        let t = tenant(Status::Active);
        store.tenants.lock().unwrap().push(t.clone());
        let probe = gateways();
        let sealer = Arc::new(FakeSealer);
        let good = ready(create(
            &store,
            &probe,
            sealer.clone(),
            admin(),
            t.id,
            new_key("AIHK", "  sk-good "),
            Utc::now(),
        ))
        .unwrap();
        assert_eq!(
            (good.status, good.status_reason),
            (AiKeyStatus::Ready, None)
        );
        assert!(good.chat_enabled);
        assert_eq!(good.sealed_secret, "sealed:sk-good");
        let bad = ready(create(
            &store,
            &probe,
            sealer,
            admin(),
            t.id,
            new_key("AICA", "sk-bad"),
            Utc::now(),
        ))
        .unwrap();
        assert_eq!(
            (bad.status, bad.status_reason.as_deref()),
            (AiKeyStatus::NotReady, Some("401 from the gateway"))
        );
        // The trimmed secret was probed in the key's own region, once each.
        assert_eq!(
            *probe.probed.lock().unwrap(),
            vec![
                (Region::Aihk, "sk-good".to_owned()),
                (Region::Aica, "sk-bad".to_owned())
            ]
        );
        assert_eq!(store.keys.lock().unwrap().len(), 2);
    }

    #[test]
    fn a_key_for_a_region_without_a_gateway_is_stored_not_ready_unprobed() {
        let store = Fake::default();
        let t = tenant(Status::Active);
        store.tenants.lock().unwrap().push(t.clone());
        let probe = FakeProbe::default();
        let key = ready(create(
            &store,
            &probe,
            Arc::new(FakeSealer),
            admin(),
            t.id,
            new_key("AIHK", "sk-good"),
            Utc::now(),
        ))
        .unwrap();
        assert_eq!(
            (key.status, key.status_reason.as_deref()),
            (
                AiKeyStatus::NotReady,
                Some("the AIHK gateway is not configured")
            )
        );
    }

    #[test]
    fn a_refused_key_is_neither_probed_nor_stored() {
        let store = Fake::default();
        let t = tenant(Status::Active);
        store.tenants.lock().unwrap().push(t.clone());
        let member = session(
            user(Role::Member, Status::Active, Some(&t)),
            Some(t.clone()),
            None,
        );
        let probe = gateways();
        let cases = [
            (member, t.id, new_key("AIHK", "sk-good"), "admin_required"),
            (
                admin(),
                Uuid::now_v7(),
                new_key("AIHK", "sk-good"),
                "not_found",
            ),
            (admin(), t.id, new_key("EU", "sk-good"), "validation_failed"),
            (
                admin(),
                t.id,
                new_key("AIHK", "sk bad"),
                "validation_failed",
            ),
        ];
        for (caller, tenant_id, key, code) in cases {
            let err = ready(create(
                &store,
                &probe,
                Arc::new(FakeSealer),
                caller,
                tenant_id,
                key,
                Utc::now(),
            ))
            .unwrap_err();
            assert_eq!(err.code().as_str(), code);
        }
        assert!(probe.probed.lock().unwrap().is_empty());
        assert!(store.keys.lock().unwrap().is_empty());
    }

    #[test]
    fn keys_are_listed_per_tenant_and_deleted_once() {
        let store = Fake::default();
        let t = tenant(Status::Active);
        let other = tenant(Status::Active);
        store
            .tenants
            .lock()
            .unwrap()
            .extend([t.clone(), other.clone()]);
        let probe = gateways();
        let mine = ready(create(
            &store,
            &probe,
            Arc::new(FakeSealer),
            admin(),
            t.id,
            new_key("AIHK", "sk-good"),
            Utc::now(),
        ))
        .unwrap();
        ready(create(
            &store,
            &probe,
            Arc::new(FakeSealer),
            admin(),
            other.id,
            new_key("AIHK", "sk-good"),
            Utc::now(),
        ))
        .unwrap();
        let listed = ready(list(&store, admin(), t.id)).unwrap();
        assert_eq!(
            listed.iter().map(|k| k.id).collect::<Vec<_>>(),
            vec![mine.id]
        );
        ready(delete(&store, admin(), t.id, mine.id)).unwrap();
        assert_eq!(
            ready(delete(&store, admin(), t.id, mine.id))
                .unwrap_err()
                .code()
                .as_str(),
            "not_found"
        );
        assert!(ready(list(&store, admin(), t.id)).unwrap().is_empty());
        assert_eq!(
            ready(list(&store, admin(), Uuid::now_v7()))
                .unwrap_err()
                .code()
                .as_str(),
            "not_found"
        );
    }
}
