//! Test doubles of the domain's ports that other crates' tests share (cargo feature
//! `test-support`; always built for this crate's own tests).

use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::{Map, Value};

use crate::policy::runs::{ChatAnswer, ChatUpstream, RunReport, UpstreamFailure};
use crate::secret::SecretString;
use crate::values::Region;

/// What a [`ChatOnlyUpstream`] answers a chat sent with the key `secret`: the report of a
/// completion, or a failure. A closure `Fn(&str) -> Result<RunReport, UpstreamFailure>` is one.
pub trait ChatAnswers: Send + Sync + 'static {
    fn answer(&self, secret: &str) -> Result<RunReport, UpstreamFailure>;
}

impl<F> ChatAnswers for F
where
    F: Fn(&str) -> Result<RunReport, UpstreamFailure> + Send + Sync + 'static,
{
    fn answer(&self, secret: &str) -> Result<RunReport, UpstreamFailure> {
        self(secret)
    }
}

/// A region gateway that serves chat runs only, at once: every region is configured, bodies
/// and streams are `()`, each chat is answered by `answers` when it is sent, and the other run
/// kinds fail without a call (the port's default [`ChatUpstream::call`]). A retry does not
/// wait; `backoffs` counts them. `tokens` counts a text's tokens in every model.
pub struct ChatOnlyUpstream<A> {
    pub answers: A,
    /// The models of every region, its default first.
    pub models: Vec<String>,
    pub tokens: fn(&str) -> u64,
    /// How many times a retry was waited for.
    pub backoffs: AtomicU32,
}

impl<A: ChatAnswers> ChatOnlyUpstream<A> {
    pub fn new(models: &[&str], tokens: fn(&str) -> u64, answers: A) -> Self {
        Self {
            answers,
            models: models.iter().map(|m| (*m).to_owned()).collect(),
            tokens,
            backoffs: AtomicU32::new(0),
        }
    }

    /// The retries waited for so far.
    pub fn backoffs(&self) -> u32 {
        self.backoffs.load(Ordering::SeqCst)
    }
}

impl<A: ChatAnswers> ChatUpstream for ChatOnlyUpstream<A> {
    type Body = ();
    type Stream = ();
    fn configured(&self, _: Region) -> bool {
        true
    }
    fn chat(
        &self,
        _: Region,
        key: &SecretString,
        _: Map<String, Value>,
    ) -> impl Future<Output = Result<ChatAnswer<(), ()>, UpstreamFailure>> + Send {
        let answer = self.answers.answer(key.expose());
        std::future::ready(answer.map(|report| ChatAnswer::Complete { body: (), report }))
    }
    fn models(&self, _: Region) -> Vec<String> {
        self.models.clone()
    }
    fn backoff(&self) -> impl Future<Output = ()> + Send {
        self.backoffs.fetch_add(1, Ordering::SeqCst);
        std::future::ready(())
    }
    fn on_finish(&self, _: (), _: bool, _: Box<dyn FnOnce(RunReport) + Send>) {}
    fn count_tokens(&self, _: &str, text: &str) -> u64 {
        (self.tokens)(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fakes::{answered, ready};

    #[test]
    fn a_closure_answers_each_chat_by_the_keys_secret() {
        let upstream = ChatOnlyUpstream::new(
            &["m-0", "m-1"],
            |text| text.len() as u64,
            |secret: &str| match secret {
                "good" => Ok(answered("m-1")),
                _ => Err(UpstreamFailure::KeyRejected),
            },
        );
        assert!(Region::ALL.into_iter().all(|r| upstream.configured(r)));
        assert_eq!(upstream.models(Region::Aica), vec!["m-0", "m-1"]);
        assert_eq!(upstream.count_tokens("m-0", "four"), 4);
        let chat =
            |secret| ready(upstream.chat(Region::Aihk, &SecretString::new(secret), Map::new()));
        let Ok(ChatAnswer::Complete { report, .. }) = chat("good") else {
            panic!("not a completion");
        };
        assert_eq!(report, answered("m-1"));
        assert_eq!(chat("bad").err(), Some(UpstreamFailure::KeyRejected));
        assert_eq!(upstream.backoffs(), 0);
        ready(upstream.backoff());
        ready(upstream.backoff());
        assert_eq!(upstream.backoffs(), 2);
    }
}
