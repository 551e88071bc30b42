//! Which keys a start-up re-check probes, over the in-memory fakes: `not_ready` keys and keys
//! without a check (whatever their status), judged or added before the start only.

use chrono::Duration;

use super::*;
use crate::access::tests::tenant;
use crate::fakes::{ready, Fake, FakeProbe, FakeSealer};
use crate::gateway::tests::key;
use crate::model::Status;

#[test]
fn a_recheck_takes_not_ready_or_unchecked_keys_judged_before_the_start_only() {
    let now = Utc::now();
    let earlier = now - Duration::minutes(5);
    let t = tenant(Status::Active);
    let stored = |status, checked_at, created_at| {
        let mut k = key(&t, Region::Aihk, true, status);
        k.sealed_secret = "sealed:sk-good".into();
        k.checked_at = checked_at;
        k.created_at = created_at;
        k
    };
    // Probed: a `not_ready` key judged before the start, and a `ready` one whose check was
    // cleared (its region's URL changed).
    let not_ready = stored(AiKeyStatus::NotReady, Some(earlier), earlier);
    let unchecked = stored(AiKeyStatus::Ready, None, earlier);
    // Left alone: a `ready` key judged before; a key judged or added at the start itself.
    let judged = stored(AiKeyStatus::Ready, Some(earlier), earlier);
    let judged_now = stored(AiKeyStatus::NotReady, Some(now), earlier);
    let added_now = stored(AiKeyStatus::NotReady, None, now);
    let store = Fake::with_keys(vec![
        not_ready.clone(),
        unchecked.clone(),
        judged,
        judged_now,
        added_now,
    ]);
    let mut probe = FakeProbe::default();
    probe.gateways.insert(
        Region::Aihk,
        GatewayCheck {
            reachable: true,
            status_code: Some(200),
            latency_ms: 1,
            reason: None,
        },
    );
    let got = ready(recheck_after_configuration(
        &store,
        &probe,
        Arc::new(FakeSealer),
        vec![Region::Aihk],
        RecheckBounds::default(),
        now,
    ))
    .unwrap();
    let mut ids: Vec<Uuid> = got.iter().map(|k| k.id).collect();
    ids.sort();
    let mut expected = vec![not_ready.id, unchecked.id];
    expected.sort();
    assert_eq!(ids, expected);
    assert_eq!(probe.probed.lock().unwrap().len(), 2);
}
