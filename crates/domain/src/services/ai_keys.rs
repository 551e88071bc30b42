//! Tenant AI keys (administration): add a key, checked at once against its region's gateway;
//! list; delete; and the start-up re-check of keys whose region's gateway was not usable when
//! they were last checked ([`recheck_after_configuration`]). The probe-to-status decision
//! ([`key_status`]) is shared with the diagnostics.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

use chrono::{DateTime, Utc};
use serde_json::json;
use uuid::Uuid;

use super::Storage;
use crate::error::DomainResult;
use crate::model::workspace::{ActivityTarget, NewActivity};
use crate::policy::access::{AdminAuthority, AdminScope};
use crate::policy::ai_access::{ai_key_binding, AiKeyStatus, KeyVerdict, TenantAiKey};
use crate::ports::{AiKeyRepo, KeySealer, TenantRepo, WorkspaceRepo};
use crate::secret::SecretString;
use crate::services::admin;
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

/// The ports of the use cases that check keys against the gateways (adding a key, the
/// diagnosis) as one value: where their storage work runs, the gateways' probe and the sealer
/// of secrets. The bounds are written here once (decision 0063); a triple
/// `(&db, &probe, sealer)` is one.
pub trait KeyPorts {
    type Db: Storage<Store: TenantRepo + AiKeyRepo>;
    type Probe: KeyProbe + ?Sized;
    fn db(&self) -> &Self::Db;
    fn probe(&self) -> &Self::Probe;
    fn sealer(&self) -> Arc<dyn KeySealer>;
}

impl<D, K> KeyPorts for (&D, &K, Arc<dyn KeySealer>)
where
    D: Storage<Store: TenantRepo + AiKeyRepo>,
    K: KeyProbe + ?Sized,
{
    type Db = D;
    type Probe = K;
    fn db(&self) -> &D {
        self.0
    }
    fn probe(&self) -> &K {
        self.1
    }
    fn sealer(&self) -> Arc<dyn KeySealer> {
        Arc::clone(&self.2)
    }
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
pub async fn create<A: AdminAuthority + Send + 'static>(
    ports: impl KeyPorts,
    admin: A,
    tenant_id: Uuid,
    key: NewAiKey,
    now: DateTime<Utc>,
) -> DomainResult<TenantAiKey> {
    let sealer = ports.sealer();
    let plan = ports
        .db()
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
    let (status, reason) = check_key(ports.probe(), plan.region(), plan.secret()).await;
    ports
        .db()
        .run(move |store| admin::store_ai_key(store, plan, status, reason))
        .await
}

/// The tenant's upstream keys (never their secrets).
pub async fn list<D, A>(db: &D, admin: A, tenant_id: Uuid) -> DomainResult<Vec<TenantAiKey>>
where
    D: Storage,
    A: AdminAuthority + Send + 'static,
    D::Store: TenantRepo + AiKeyRepo,
{
    db.run(move |store| admin::list_ai_keys(store, &admin, tenant_id))
        .await
}

/// Deletes one of the tenant's upstream keys; `not_found` when there is none.
pub async fn delete<D, A>(db: &D, admin: A, tenant_id: Uuid, key_id: Uuid) -> DomainResult<()>
where
    D: Storage,
    A: AdminAuthority + Send + 'static,
    D::Store: AiKeyRepo,
{
    db.run(move |store| admin::delete_ai_key(store, &admin, tenant_id, key_id))
        .await
}

/// How far a start-up re-check goes: probes at once, and keys at most (the rest wait for the
/// next start or an admin's diagnosis).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecheckBounds {
    pub concurrency: usize,
    pub max_keys: usize,
}

impl Default for RecheckBounds {
    fn default() -> Self {
        Self {
            concurrency: 4,
            max_keys: 1_000,
        }
    }
}

/// One key as checked now (never its secret): by a start-up re-check or a diagnosis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedKey {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub region: Region,
    pub status: AiKeyStatus,
    pub status_reason: Option<String>,
}

impl CheckedKey {
    /// `key` with the status found now.
    pub fn new(key: &TenantAiKey, status: AiKeyStatus, status_reason: Option<String>) -> Self {
        Self {
            id: key.id,
            tenant_id: key.tenant_id,
            region: key.region,
            status,
            status_reason,
        }
    }
}

/// The activity action of a start-up re-check, one line per key in its tenant's feed.
pub const RECHECKED_ACTION: &str = "ai_key.rechecked";

/// Re-checks, once the server starts, the keys of the regions whose gateway is configured now
/// (`configured`) that were not judged against the current configuration:
/// - every `not_ready` key: one added while its region had no URL, or judged against a URL
///   that was wrong or down;
/// - every key without a `checked_at`, `ready` ones too: the store clears it on each key of a
///   region whose gateway URL differs from the one its keys were judged against (decision
///   0044: a fingerprint of each region's URL is kept; `docs/gateway.md`, "Key status follows
///   configuration").
///
/// Other `ready` keys are left alone: probing every key at every start would cost one upstream
/// call per key, and a run that gets a 401 marks a bad one at once.
///
/// Each key is probed (at most `bounds.concurrency` at once, `bounds.max_keys` in all, oldest
/// first) and its verdict stored as soon as it is known, with an [`RECHECKED_ACTION`] line in
/// its tenant's feed, so a caller that stops waiting keeps every verdict already found. A key
/// that does not open with the current master key is left as it is, and so is a key added or
/// checked at or after `now` (the start).
pub async fn recheck_after_configuration<D, K>(
    db: &D,
    probe: &K,
    sealer: Arc<dyn KeySealer>,
    configured: Vec<Region>,
    bounds: RecheckBounds,
    now: DateTime<Utc>,
) -> DomainResult<Vec<CheckedKey>>
where
    D: Storage,
    D::Store: AiKeyRepo + WorkspaceRepo,
    K: KeyProbe + ?Sized,
{
    if configured.is_empty() || bounds.max_keys == 0 {
        return Ok(Vec::new());
    }
    let scope = AdminScope::server_start_up();
    let listed = scope.clone();
    let max_keys = bounds.max_keys;
    let keys = db
        .run(move |store| {
            let mut keys: Vec<_> = store
                .list_ai_keys(&listed, None)?
                .into_iter()
                .filter(|k| {
                    (k.status == AiKeyStatus::NotReady || k.checked_at.is_none())
                        && configured.contains(&k.region)
                })
                // Judged before this start only: a key added or checked since has a fresh
                // verdict (and a test's new key is never probed twice).
                .filter(|k| k.checked_at.unwrap_or(k.created_at) < now)
                .collect();
            keys.sort_by_key(|k| k.created_at);
            keys.truncate(max_keys);
            Ok(keys
                .into_iter()
                .filter_map(|key| {
                    let secret =
                        sealer.open(&key.sealed_secret, &ai_key_binding(key.tenant_id, key.id))?;
                    Some((key, secret))
                })
                .collect::<Vec<_>>())
        })
        .await?;
    let checks = keys.into_iter().map(|(key, secret)| {
        let scope = scope.clone();
        async move {
            let (status, reason) = check_key(probe, key.region, &secret).await;
            let (previous, url_changed) = (key.status, key.checked_at.is_none());
            let checked = CheckedKey::new(&key, status, reason.clone());
            db.run(move |store| {
                let verdict = KeyVerdict::diagnosed(&scope, &key, status, reason.clone(), now);
                store.set_ai_key_status(&verdict)?;
                store.append_activity(&NewActivity::admin(
                    &scope,
                    key.tenant_id,
                    now,
                    RECHECKED_ACTION,
                    Some(ActivityTarget {
                        kind: "ai_key".into(),
                        id: key.id,
                    }),
                    json!({
                        "region": key.region.as_str(),
                        "label": key.label,
                        "hint": key.hint,
                        "status": status.as_str(),
                        "status_reason": reason,
                        "previous_status": previous.as_str(),
                        "trigger": if url_changed { "gateway_url_changed" } else { "gateway_configuration" },
                    }),
                ))
            })
            .await
            .map(|()| checked)
        }
    });
    at_most(bounds.concurrency, checks)
        .await
        .into_iter()
        .collect()
}

/// Runs `futures` with at most `limit` of them in flight at once; their outputs in the order
/// they finished. (The domain has no executor: this polls the few in flight on every wake.)
async fn at_most<F: Future>(limit: usize, futures: impl IntoIterator<Item = F>) -> Vec<F::Output> {
    let mut waiting = futures.into_iter();
    let mut running: Vec<Pin<Box<F>>> = Vec::new();
    let mut out = Vec::new();
    std::future::poll_fn(|cx| loop {
        while running.len() < limit.max(1) {
            match waiting.next() {
                Some(f) => running.push(Box::pin(f)),
                None => break,
            }
        }
        if running.is_empty() {
            return Poll::Ready(());
        }
        let before = running.len();
        let mut i = 0;
        while i < running.len() {
            match running[i].as_mut().poll(cx) {
                Poll::Ready(v) => {
                    out.push(v);
                    drop(running.swap_remove(i));
                }
                Poll::Pending => i += 1,
            }
        }
        if running.len() == before {
            return Poll::Pending;
        }
    })
    .await;
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fakes::{ready, Fake, FakeProbe, FakeSealer};
    use crate::model::{Role, Status};
    use crate::policy::access::tests::{session, tenant, user};
    use crate::policy::access::Principal;

    fn admin() -> Principal {
        session(user(Role::PlatformAdmin, Status::Active, None), None, None)
    }

    /// Adds `key` to the tenant as `caller`, now.
    fn add(
        store: &Fake,
        probe: &FakeProbe,
        caller: Principal,
        tenant_id: Uuid,
        key: NewAiKey,
    ) -> DomainResult<TenantAiKey> {
        let sealer: Arc<dyn KeySealer> = Arc::new(FakeSealer);
        ready(create(
            (store, probe, sealer),
            caller,
            tenant_id,
            key,
            Utc::now(),
        ))
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
        let t = store.stored_tenant(Status::Active);
        let probe = gateways();
        let good = add(&store, &probe, admin(), t.id, new_key("AIHK", "  sk-good ")).unwrap();
        assert_eq!(
            (good.status, good.status_reason),
            (AiKeyStatus::Ready, None)
        );
        assert!(good.chat_enabled);
        assert_eq!(good.sealed_secret, "sealed:sk-good");
        let bad = add(&store, &probe, admin(), t.id, new_key("AICA", "sk-bad")).unwrap();
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
        let t = store.stored_tenant(Status::Active);
        let probe = FakeProbe::default();
        let key = add(&store, &probe, admin(), t.id, new_key("AIHK", "sk-good")).unwrap();
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
        let t = store.stored_tenant(Status::Active);
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
            let err = add(&store, &probe, caller, tenant_id, key).unwrap_err();
            assert_eq!(err.code().as_str(), code);
        }
        assert!(probe.probed.lock().unwrap().is_empty());
        assert!(store.keys.lock().unwrap().is_empty());
    }

    #[test]
    fn keys_are_listed_per_tenant_and_deleted_once() {
        let store = Fake::default();
        let t = store.stored_tenant(Status::Active);
        let other = store.stored_tenant(Status::Active);
        let probe = gateways();
        let mine = add(&store, &probe, admin(), t.id, new_key("AIHK", "sk-good")).unwrap();
        add(
            &store,
            &probe,
            admin(),
            other.id,
            new_key("AIHK", "sk-good"),
        )
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

    fn sealed(mut k: TenantAiKey, secret: &str) -> TenantAiKey {
        k.sealed_secret = format!("sealed:{secret}");
        k
    }

    #[test]
    fn at_start_up_not_ready_keys_of_configured_regions_are_probed_again_and_recorded() {
        use crate::policy::ai_access::tests::key;
        let t = tenant(Status::Active);
        // Added while AIHK had no URL: the case of issue 31.
        let mut unconfigured = sealed(
            key(&t, Region::Aihk, true, AiKeyStatus::NotReady),
            "sk-good",
        );
        unconfigured.status_reason = Some("the AIHK gateway is not configured".into());
        let refused = sealed(key(&t, Region::Aihk, true, AiKeyStatus::NotReady), "sk-bad");
        let mut ready_key = sealed(key(&t, Region::Aihk, true, AiKeyStatus::Ready), "sk-good");
        ready_key.checked_at = Some(Utc::now() - chrono::Duration::hours(1));
        // Ready, but judged against another URL of its region (the store cleared its
        // checked_at): probed again, and the new URL refuses it.
        let moved = sealed(key(&t, Region::Aihk, true, AiKeyStatus::Ready), "sk-bad");
        // AICA is still not configured: its key is not probed.
        let elsewhere = sealed(
            key(&t, Region::Aica, true, AiKeyStatus::NotReady),
            "sk-good",
        );
        // Sealed under another master key: left as it is.
        let lost = key(&t, Region::Aihk, true, AiKeyStatus::NotReady);
        // Checked after the start: its verdict is fresh.
        let mut fresh = sealed(
            key(&t, Region::Aihk, true, AiKeyStatus::NotReady),
            "sk-good",
        );
        fresh.checked_at = Some(Utc::now() + chrono::Duration::hours(1));
        let store = Fake::with_keys(vec![
            unconfigured.clone(),
            refused.clone(),
            ready_key,
            moved.clone(),
            elsewhere,
            lost,
            fresh,
        ]);
        let probe = gateways();
        let mut got = ready(recheck_after_configuration(
            &store,
            &probe,
            Arc::new(FakeSealer),
            vec![Region::Aihk],
            RecheckBounds::default(),
            Utc::now(),
        ))
        .unwrap();
        got.sort_by_key(|k| k.id);
        assert_eq!(
            got.iter()
                .map(|k| (k.id, k.status, k.status_reason.as_deref()))
                .collect::<Vec<_>>(),
            vec![
                (unconfigured.id, AiKeyStatus::Ready, None),
                (
                    refused.id,
                    AiKeyStatus::NotReady,
                    Some("401 from the gateway")
                ),
                (
                    moved.id,
                    AiKeyStatus::NotReady,
                    Some("401 from the gateway")
                ),
            ]
        );
        assert_eq!(probe.probed.lock().unwrap().len(), 3);
        let verdicts = store.verdicts.lock().unwrap();
        assert_eq!(verdicts.len(), 3);
        assert!(verdicts
            .iter()
            .any(|v| v.key_id() == unconfigured.id && v.status() == AiKeyStatus::Ready));
        let activity = store.workspace.activity.lock().unwrap();
        assert_eq!(activity.len(), 3);
        let moved_line = format!(
            "{:?}",
            activity
                .iter()
                .find(|a| format!("{a:?}").contains(&moved.id.to_string()))
                .unwrap()
        );
        assert!(moved_line.contains("gateway_url_changed"), "{moved_line}");
        for line in activity.iter() {
            assert_eq!(line.action(), RECHECKED_ACTION);
            assert_eq!(line.tenant_id(), t.id);
            assert!(!format!("{line:?}").contains("sk-good"), "{line:?}");
        }
        // Nothing configured: nothing probed, nothing read.
        let none = ready(recheck_after_configuration(
            &store,
            &probe,
            Arc::new(FakeSealer),
            vec![],
            RecheckBounds::default(),
            Utc::now(),
        ))
        .unwrap();
        assert!(none.is_empty());
        assert_eq!(probe.probed.lock().unwrap().len(), 3);
    }

    /// A probe that stays pending once per call and counts the probes in flight.
    #[derive(Default)]
    struct SlowProbe {
        in_flight: std::sync::atomic::AtomicUsize,
        most: std::sync::atomic::AtomicUsize,
        calls: std::sync::atomic::AtomicUsize,
    }

    impl KeyProbe for SlowProbe {
        async fn probe_key(&self, _: Region, _: &SecretString) -> Option<KeyProbeAnswer> {
            use std::sync::atomic::Ordering::SeqCst;
            self.calls.fetch_add(1, SeqCst);
            let now = self.in_flight.fetch_add(1, SeqCst) + 1;
            self.most.fetch_max(now, SeqCst);
            let mut yielded = false;
            std::future::poll_fn(|cx| {
                if yielded {
                    Poll::Ready(())
                } else {
                    yielded = true;
                    cx.waker().wake_by_ref();
                    Poll::Pending
                }
            })
            .await;
            self.in_flight.fetch_sub(1, SeqCst);
            Some(answer(true, None))
        }
        async fn check_gateway(&self, _: Region) -> Option<GatewayCheck> {
            None
        }
    }

    #[test]
    fn a_start_up_recheck_probes_at_most_its_bound_at_once_and_in_all() {
        use crate::policy::ai_access::tests::key;
        use std::sync::atomic::Ordering::SeqCst;
        let t = tenant(Status::Active);
        let keys: Vec<_> = (0..7)
            .map(|_| {
                sealed(
                    key(&t, Region::Aihk, true, AiKeyStatus::NotReady),
                    "sk-good",
                )
            })
            .collect();
        let store = Fake::with_keys(keys);
        let probe = SlowProbe::default();
        let got = ready(recheck_after_configuration(
            &store,
            &probe,
            Arc::new(FakeSealer),
            vec![Region::Aihk],
            RecheckBounds {
                concurrency: 2,
                max_keys: 5,
            },
            Utc::now(),
        ))
        .unwrap();
        assert_eq!(got.len(), 5);
        assert!(got.iter().all(|k| k.status == AiKeyStatus::Ready));
        assert_eq!(probe.calls.load(SeqCst), 5);
        assert_eq!(probe.most.load(SeqCst), 2);
    }
}
#[cfg(test)]
#[path = "ai_keys_tests.rs"]
mod recheck_tests;
