//! The readiness check behind `GET /api/v1/ready`: the database answers and accepts writes,
//! the run-record writer runs and its queue has room.
//!
//! Probes are bounded: an answer is kept for [`FRESH_FOR`], concurrent probes wait for the one
//! check in flight instead of starting their own, and while a database check that timed out
//! is still running on the blocking pool no other is started (the probe says `timeout` at
//! once). However many probes arrive, the database sees at most one check at a time and one
//! a second.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use chrono::{SecondsFormat, Utc};
use serde::Serialize;
use utoipa::ToSchema;

use crate::gateway::RunRecorder;
use crate::state::AppState;

/// How long an answer is kept.
pub const FRESH_FOR: Duration = Duration::from_secs(1);
/// How long the database has to answer the check.
pub const DATABASE_TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReadyStatus {
    Ready,
    NotReady,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DatabaseStatus {
    /// Answered and took the write lock (SQLite) or is not read-only (PostgreSQL).
    Ok,
    /// No answer within two seconds (or the previous check is still waiting).
    Timeout,
    /// Answered with an error (unreachable, locked, read-only): see the server log.
    Failed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum WriterStatus {
    /// Running, with room in its queue.
    Ok,
    /// Every place of the queue is taken: the writer is behind (a slow database), and new
    /// runs are refused or entries dropped until it catches up.
    Full,
    /// The writer has stopped: nothing is written any more (restart the process).
    Stopped,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DatabaseCheck {
    pub status: DatabaseStatus,
    /// How long the check took, when it finished in time.
    pub latency_ms: Option<u64>,
    /// What went wrong, in a few words (the cause is in the server log).
    pub message: Option<&'static str>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RunRecordsCheck {
    pub status: WriterStatus,
    /// Run records and key verdicts waiting for the writer.
    pub queued: u64,
    /// The most the queue holds.
    pub capacity: u64,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ReadyChecks {
    pub database: DatabaseCheck,
    pub run_records: RunRecordsCheck,
}

/// The answer of `GET /api/v1/ready`, with 200 (`ready`) or 503 (`not_ready`).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ReadyBody {
    pub status: ReadyStatus,
    /// When the checks ran (RFC 3339); an answer is kept for one second.
    pub checked_at: String,
    pub checks: ReadyChecks,
}

/// The last answer and the single check in flight, shared by every worker.
#[derive(Debug, Default)]
pub struct Readiness {
    last: Mutex<Option<(Instant, ReadyBody)>>,
    turn: tokio::sync::Mutex<()>,
    /// Set while a database check runs on the blocking pool (also after its probe timed out).
    pending: Arc<AtomicBool>,
}

/// Clears the pending flag when dropped: when the check ends, or when it never ran.
struct Done(Arc<AtomicBool>);

impl Drop for Done {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

impl Readiness {
    fn fresh(&self) -> Option<ReadyBody> {
        let last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        last.as_ref()
            .filter(|(at, _)| at.elapsed() < FRESH_FOR)
            .map(|(_, body)| body.clone())
    }

    /// The kept answer while fresh, else the answer of a new check (one at a time).
    pub async fn check(&self, state: &AppState) -> ReadyBody {
        if let Some(body) = self.fresh() {
            return body;
        }
        let _turn = self.turn.lock().await;
        if let Some(body) = self.fresh() {
            return body;
        }
        let database = self.database(state).await;
        let run_records = run_records(&state.recorder);
        let status =
            if database.status == DatabaseStatus::Ok && run_records.status == WriterStatus::Ok {
                ReadyStatus::Ready
            } else {
                ReadyStatus::NotReady
            };
        let body = ReadyBody {
            status,
            checked_at: Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true),
            checks: ReadyChecks {
                database,
                run_records,
            },
        };
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) =
            Some((Instant::now(), body.clone()));
        body
    }

    async fn database(&self, state: &AppState) -> DatabaseCheck {
        if self.pending.swap(true, Ordering::SeqCst) {
            state.metrics.readiness_check("busy");
            return DatabaseCheck {
                status: DatabaseStatus::Timeout,
                latency_ms: None,
                message: Some("the previous check is still waiting for the database"),
            };
        }
        let done = Done(Arc::clone(&self.pending));
        let started = Instant::now();
        let work = state.db(move |store| {
            let _done = done;
            gc_domain::services::system::ready(store)
        });
        let check = tokio::time::timeout(DATABASE_TIMEOUT, work).await;
        state.metrics.readiness_check(match &check {
            Ok(Ok(())) => "ok",
            Ok(Err(_)) => "failed",
            Err(_) => "timeout",
        });
        match check {
            Ok(Ok(())) => DatabaseCheck {
                status: DatabaseStatus::Ok,
                latency_ms: Some(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)),
                message: None,
            },
            Ok(Err(e)) => {
                tracing::warn!(
                    code = e.code().as_str(),
                    "readiness: the database check failed"
                );
                DatabaseCheck {
                    status: DatabaseStatus::Failed,
                    latency_ms: None,
                    message: Some("the database refused the check"),
                }
            }
            Err(_) => {
                tracing::warn!("readiness: the database did not answer within 2 s");
                DatabaseCheck {
                    status: DatabaseStatus::Timeout,
                    latency_ms: None,
                    message: Some("no answer within 2 s"),
                }
            }
        }
    }
}

/// The run-record writer's state, from its queue.
pub fn run_records(recorder: &RunRecorder) -> RunRecordsCheck {
    let queued = recorder.depth();
    let capacity = recorder.capacity();
    let status = if recorder.writer_stopped() {
        WriterStatus::Stopped
    } else if queued >= capacity {
        WriterStatus::Full
    } else {
        WriterStatus::Ok
    };
    RunRecordsCheck {
        status,
        queued: u64::try_from(queued).unwrap_or(u64::MAX),
        capacity: u64::try_from(capacity).unwrap_or(u64::MAX),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stopped_writer_is_not_ready() {
        let (recorder, rx) = RunRecorder::channel(4);
        let check = run_records(&recorder);
        assert_eq!(check.status, WriterStatus::Ok);
        assert_eq!((check.queued, check.capacity), (0, 4));
        drop(rx);
        assert_eq!(run_records(&recorder).status, WriterStatus::Stopped);
    }
}
