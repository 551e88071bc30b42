//! Which keys a start-up re-check probes, over the in-memory fakes: `not_ready` keys and keys
//! without a check (whatever their status), judged or added before the start only.

use chrono::Duration;
use std::task::Poll;

use super::*;
use crate::fakes::{ready, Fake, FakeProbe, FakeSealer};
use crate::model::Status;
use crate::policy::access::tests::tenant;
use crate::policy::ai_access::tests::key;

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

/// Answers `value` after `polls - 1` pending polls, waking itself each time.
async fn after(polls: usize, value: &'static str) -> &'static str {
    let mut left = polls;
    std::future::poll_fn(|cx| {
        left -= 1;
        if left == 0 {
            Poll::Ready(value)
        } else {
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    })
    .await
}

#[test]
fn bounded_futures_answer_in_the_order_they_finish() {
    // Every running future is polled on each turn: the quick one finishes first.
    let out = ready(at_most(2, [after(3, "slow"), after(1, "quick")]));
    assert_eq!(out, ["quick", "slow"]);
    // One at a time, each started as soon as the one before finished, in the same poll (a
    // pending answer with nothing left to wake it would never be polled again).
    let out = ready(at_most(1, [after(1, "a"), after(1, "b"), after(1, "c")]));
    assert_eq!(out, ["a", "b", "c"]);
    // A bound of 0 still runs one at a time.
    assert_eq!(ready(at_most(0, [after(2, "x")])), ["x"]);
}

/// The fake store, counting the storage trips made.
struct Trips<'a> {
    store: &'a Fake,
    trips: std::sync::Mutex<u32>,
}

impl crate::services::Storage for Trips<'_> {
    type Store = Fake;
    fn run<T, F>(&self, work: F) -> impl Future<Output = DomainResult<T>>
    where
        T: Send + 'static,
        F: FnOnce(&Fake) -> DomainResult<T> + Send + 'static,
    {
        *self.trips.lock().unwrap() += 1;
        std::future::ready(work(self.store))
    }
}

#[test]
fn a_recheck_with_no_region_or_no_room_makes_no_storage_trip() {
    let t = tenant(Status::Active);
    let mut k = key(&t, Region::Aihk, true, AiKeyStatus::NotReady);
    k.sealed_secret = "sealed:sk-good".into();
    k.created_at = Utc::now() - Duration::minutes(5);
    let store = Fake::with_keys(vec![k]);
    let db = Trips {
        store: &store,
        trips: std::sync::Mutex::new(0),
    };
    let probe = FakeProbe::default();
    let recheck = |configured: Vec<Region>, max_keys| {
        ready(recheck_after_configuration(
            &db,
            &probe,
            Arc::new(FakeSealer),
            configured,
            RecheckBounds {
                concurrency: 4,
                max_keys,
            },
            Utc::now(),
        ))
        .unwrap()
    };
    assert!(recheck(Vec::new(), 1_000).is_empty());
    assert!(recheck(vec![Region::Aihk], 0).is_empty());
    assert_eq!(*db.trips.lock().unwrap(), 0);
    assert!(probe.probed.lock().unwrap().is_empty());
    // With a region and room, the key is listed, probed and its verdict stored: two trips.
    assert_eq!(recheck(vec![Region::Aihk], 1_000).len(), 1);
    assert_eq!(*db.trips.lock().unwrap(), 2);
}
