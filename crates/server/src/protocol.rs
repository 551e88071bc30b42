//! Protocol errors with the API's error body.
//!
//! actix-http answers a request head it cannot accept (a malformed request line or header, a
//! duplicate `Content-Length`, `Content-Length` with `Transfer-Encoding`, headers beyond its
//! limits) itself, before any middleware runs: a bare `400`/`431` with no body and no
//! `x-request-id`. [`Checked`] wraps each client connection and checks every request head
//! the same way actix-http will, before actix-http sees it. A head actix-http would refuse is
//! never handed on: actix-http is told the client closed its side (end of stream), so it
//! finishes the requests before it and then shuts the connection down; on that shutdown the
//! wrapper writes the error, as JSON with a request id, and closes the connection.
//!
//! The checks copy actix-http 3's request decoder (`h1::decoder`: `httparse` with 96 header
//! slots, 128 KiB for an unfinished head, then its header rules). They may only ever refuse a
//! subset of what actix-http refuses: a head they pass but actix-http refuses still gets
//! actix-http's bare answer, which is what happened before. Bodies are followed by their
//! `Content-Length`; after a chunked body, a WebSocket upgrade or `CONNECT` the wrapper stops
//! checking that connection (their framing is actix-http's alone), so a bad head later on
//! such a connection gets the bare answer (docs/api.md, "Errors").
//!
//! The first head's deadline (`GC_HEADER_TIMEOUT_S`) is kept here too, in place of
//! actix-http's, so that a late head gets the JSON 408 as well.
//!
//! Cost: a head is parsed twice, here and by actix-http. For a 242-byte `POST /api/v1/run`
//! head the check is about 2.9 k instructions (callgrind, `head_check_cost` below; 1.9 k of them
//! `httparse`), about 1 % of a `/run`'s 0.3 M. A head that arrives whole in one read is checked
//! in actix-http's own buffer, so nothing is copied; only a split head is gathered aside.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use actix_web::http::{Method, Uri};
use gc_domain::ErrorCode;
use gc_http_api::error::ApiError;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// actix-http's limit on an unfinished request head (`h1::decoder::MAX_BUFFER_SIZE`).
const MAX_HEAD: usize = 131_072;
/// actix-http's header slots (`h1::decoder::MAX_HEADERS`): more headers are a 431.
const MAX_HEADERS: usize = 96;
/// Bytes read from the socket at a time while a head is incomplete.
const READ_CHUNK: usize = 8192;

/// What follows a head the checks passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Frame {
    /// The next request head.
    Head,
    /// This many body bytes (never 0), then a head.
    Body(u64),
    /// No more checks on this connection: everything is handed on as it comes.
    Through,
}

/// A refused head: the status and the message of the error body, and the request id.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Refusal {
    status: u16,
    message: &'static str,
    request_id: Option<String>,
}

/// The outcome of checking the bytes at the start of a head.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// More bytes are needed.
    Partial,
    /// A head of this many bytes that actix-http will accept, and what follows it.
    Complete(usize, Frame),
    Refused(Refusal),
}

fn refuse(status: u16, message: &'static str, request_id: Option<String>) -> Verdict {
    Verdict::Refused(Refusal {
        status,
        message,
        request_id,
    })
}

/// Checks the request head at the start of `buf` as actix-http's decoder will.
fn check_head(buf: &[u8]) -> Verdict {
    // Uninitialised slots, as actix-http uses: no 3 KiB of zeroes per head.
    let mut headers =
        [const { std::mem::MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut []);
    let len = match req.parse_with_uninit_headers(buf, &mut headers) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if buf.len() >= MAX_HEAD => {
            return refuse(431, "the request head is larger than 128 KiB", None)
        }
        Ok(httparse::Status::Partial) => return Verdict::Partial,
        Err(httparse::Error::TooManyHeaders) => {
            return refuse(431, "the request has more than 96 headers", None)
        }
        Err(httparse::Error::Version) => {
            return refuse(400, "the request line has no valid HTTP/1 version", None)
        }
        Err(httparse::Error::Token) => {
            return refuse(400, "the request line or a header name is malformed", None)
        }
        Err(_) => return refuse(400, "the request head is malformed", None),
    };
    // The caller's request id, looked up only for a refusal.
    let bad = |message| {
        let request_id = req
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case("x-request-id"))
            .and_then(|h| std::str::from_utf8(h.value).ok())
            .filter(|id| gc_http_api::middleware::sane(id))
            .map(str::to_owned);
        refuse(400, message, request_id)
    };
    let (Some(method), Some(path), Some(version)) = (req.method, req.path, req.version) else {
        return bad("the request line is malformed");
    };
    let Ok(method) = Method::from_bytes(method.as_bytes()) else {
        return bad("the request method is malformed");
    };
    if Uri::try_from(path).is_err() {
        return bad("the request target is malformed");
    }
    let http11 = version == 1;

    let mut content_length: Option<u64> = None;
    let (mut has_te, mut seen_te, mut chunked, mut seen_host, mut websocket) =
        (false, false, false, false, false);
    for header in req.headers.iter() {
        let name = header.name;
        // `HeaderValue::to_str`: visible ASCII and tabs only (worked out only when needed).
        let text = || visible(header.value).map(str::trim);
        if name.eq_ignore_ascii_case("content-length") {
            if content_length.is_some() {
                return bad("the request has more than one Content-Length");
            }
            match text() {
                Some(v) if !v.starts_with('+') => match v.parse::<u64>() {
                    Ok(n) => content_length = Some(n),
                    Err(_) => return bad("the Content-Length is not a number"),
                },
                _ => return bad("the Content-Length is not a number"),
            }
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            if seen_te {
                return bad("the request has more than one Transfer-Encoding");
            }
            has_te = true;
            if http11 {
                seen_te = true;
                match text() {
                    Some(v) if v.eq_ignore_ascii_case("chunked") => chunked = true,
                    Some(v) if v.eq_ignore_ascii_case("identity") => {}
                    _ => return bad("the Transfer-Encoding must be chunked"),
                }
            }
        } else if name.eq_ignore_ascii_case("host") {
            if seen_host {
                return bad("the request has more than one Host");
            }
            seen_host = true;
        } else if name.eq_ignore_ascii_case("upgrade") {
            websocket |= text().is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
        }
    }
    if http11 && !seen_host {
        return bad("an HTTP/1.1 request needs a Host header");
    }
    if has_te {
        if !http11 {
            return bad("Transfer-Encoding is not allowed in HTTP/1.0");
        }
        if !chunked {
            return bad("the Transfer-Encoding must be chunked");
        }
        if content_length.is_some() {
            return bad("the request has both Content-Length and Transfer-Encoding");
        }
    }
    if !http11 && method == Method::POST && content_length.is_none() && !websocket {
        return bad("an HTTP/1.0 POST needs a Content-Length");
    }
    let frame = if chunked || websocket {
        Frame::Through
    } else {
        match content_length {
            Some(n) if n > 0 => Frame::Body(n),
            _ if method == Method::CONNECT => Frame::Through,
            _ => Frame::Head,
        }
    };
    Verdict::Complete(len, frame)
}

/// `value` as text when it is visible ASCII and tabs only.
fn visible(value: &[u8]) -> Option<&str> {
    if value
        .iter()
        .all(|&b| b == b'\t' || (0x20..0x7f).contains(&b))
    {
        std::str::from_utf8(value).ok()
    } else {
        None
    }
}

/// The bytes of the answer to a refused head: the API's error body with request id `id` (the
/// client's `x-request-id` when sane, else a new one), and `connection: close`.
fn answer(refusal: &Refusal, id: &str) -> Vec<u8> {
    let (code, reason) = match refusal.status {
        408 => (ErrorCode::RequestTimeout, "Request Timeout"),
        431 => (
            ErrorCode::HeadersTooLarge,
            "Request Header Fields Too Large",
        ),
        _ => (ErrorCode::BadRequest, "Bad Request"),
    };
    let body = ApiError::new(code, refusal.message).body(id).to_string();
    let date = chrono::Utc::now().format("%a, %d %b %Y %H:%M:%S GMT");
    format!(
        "HTTP/1.1 {} {reason}\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: {}\r\nx-request-id: {id}\r\nconnection: close\r\ndate: {date}\r\n\r\n{body}",
        refusal.status,
        body.len()
    )
    .into_bytes()
}

/// A client connection whose request heads are checked before actix-http reads them (see the
/// module documentation).
pub struct Checked<T> {
    io: T,
    /// Bytes read from the socket and not yet handed on; the first `released` are checked.
    pending: Vec<u8>,
    released: usize,
    frame: Frame,
    /// The answer to a refused head, and how much of it is written.
    refused: Option<(Vec<u8>, usize)>,
    /// How long the first head may take (`GC_HEADER_TIMEOUT_S`), and its deadline once the
    /// connection is first read; `None` after the first head.
    header_timeout: Duration,
    head_deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    first_head_done: bool,
}

impl<T> Checked<T> {
    /// Wraps a new connection whose first request head must arrive within `header_timeout`
    /// (else 408 `request_timeout`, and the connection is closed). Later heads on a kept-alive
    /// connection are bounded by actix-http's keep-alive timer instead.
    pub fn new(io: T, header_timeout: Duration) -> Self {
        Self {
            io,
            pending: Vec::new(),
            released: 0,
            frame: Frame::Head,
            refused: None,
            header_timeout,
            head_deadline: None,
            first_head_done: false,
        }
    }

    /// Answers `refusal` at shutdown, with a line at INFO (as a request line would be) that
    /// carries the request id the client is given.
    fn refuse(&mut self, refusal: &Refusal) {
        let id = refusal
            .request_id
            .clone()
            .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
        tracing::info!(
            target: "gc_server::client_protocol",
            request_id = %id,
            status = refusal.status,
            error = refusal.message,
            "client protocol error"
        );
        self.refused = Some((answer(refusal, &id), 0));
        // Nothing from the refused head on is handed on.
        self.pending.truncate(self.released);
        self.head_deadline = None;
    }

    /// True once the first head's deadline has passed (registering the wake-up otherwise).
    fn first_head_late(&mut self, cx: &mut Context<'_>) -> bool {
        if self.first_head_done {
            return false;
        }
        let timeout = self.header_timeout;
        self.head_deadline
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)))
            .as_mut()
            .poll(cx)
            .is_ready()
    }

    /// Moves what the framing allows from the unchecked pending bytes to the released ones;
    /// false when more bytes must be read first.
    fn advance(&mut self) -> bool {
        let unchecked = self.pending.len() - self.released;
        if unchecked == 0 {
            return false;
        }
        match self.frame {
            Frame::Through => {
                self.released = self.pending.len();
                true
            }
            Frame::Body(left) => {
                let n = usize::try_from(left).map_or(unchecked, |l| l.min(unchecked));
                self.released += n;
                let left = left - n as u64;
                self.frame = if left == 0 {
                    Frame::Head
                } else {
                    Frame::Body(left)
                };
                true
            }
            Frame::Head => match check_head(&self.pending[self.released..]) {
                Verdict::Partial => false,
                Verdict::Complete(len, frame) => {
                    self.released += len;
                    self.frame = frame;
                    self.first_head_done = true;
                    self.head_deadline = None;
                    true
                }
                Verdict::Refused(refusal) => {
                    self.refuse(&refusal);
                    true
                }
            },
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Checked<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.released > 0 {
                let n = this.released.min(buf.remaining());
                buf.put_slice(&this.pending[..n]);
                this.pending.drain(..n);
                this.released -= n;
                return Poll::Ready(Ok(()));
            }
            if this.refused.is_some() {
                // End of stream: actix-http finishes what came before, then shuts down.
                return Poll::Ready(Ok(()));
            }
            if this.advance() {
                continue;
            }
            if this.pending.is_empty() && this.frame != Frame::Head {
                // A body or an unchecked connection: straight into the caller's buffer.
                let before = buf.filled().len();
                ready!(Pin::new(&mut this.io).poll_read(cx, buf))?;
                if let Frame::Body(left) = this.frame {
                    let got = buf.filled().len() - before;
                    match usize::try_from(left) {
                        Ok(l) if l <= got => {
                            // The body ends here; what follows is the next head.
                            this.pending.extend_from_slice(&buf.filled()[before + l..]);
                            buf.set_filled(before + l);
                            this.frame = Frame::Head;
                        }
                        _ => this.frame = Frame::Body(left - got as u64),
                    }
                }
                return Poll::Ready(Ok(()));
            }
            // A head to read, unless it is the first and late.
            if this.first_head_late(cx) {
                this.refuse(&Refusal {
                    status: 408,
                    message: "the request headers did not arrive in time",
                    request_id: None,
                });
                continue;
            }
            if this.pending.is_empty() && buf.remaining() > 0 {
                // The usual case: a whole head in one read. Read it straight into the
                // caller's buffer and check it there; only what the checks hold back (the
                // rest of a split head, a pipelined next head) is copied aside.
                let before = buf.filled().len();
                ready!(Pin::new(&mut this.io).poll_read(cx, buf))?;
                let got = buf.filled().len() - before;
                if got == 0 {
                    return Poll::Ready(Ok(()));
                }
                match check_head(&buf.filled()[before..]) {
                    Verdict::Complete(len, frame) => {
                        this.first_head_done = true;
                        this.head_deadline = None;
                        let rest = got - len;
                        let (body, frame) = match frame {
                            Frame::Body(n) => match usize::try_from(n) {
                                Ok(n) if n <= rest => (n, Frame::Head),
                                _ => (rest, Frame::Body(n - rest as u64)),
                            },
                            Frame::Through => (rest, Frame::Through),
                            Frame::Head => (0, Frame::Head),
                        };
                        this.frame = frame;
                        let keep = before + len + body;
                        this.pending.extend_from_slice(&buf.filled()[keep..]);
                        buf.set_filled(keep);
                        return Poll::Ready(Ok(()));
                    }
                    Verdict::Partial => {
                        this.pending.extend_from_slice(&buf.filled()[before..]);
                        buf.set_filled(before);
                    }
                    Verdict::Refused(refusal) => {
                        buf.set_filled(before);
                        this.refuse(&refusal);
                    }
                }
                continue;
            }
            let mut chunk = [0u8; READ_CHUNK];
            let mut read = ReadBuf::new(&mut chunk);
            ready!(Pin::new(&mut this.io).poll_read(cx, &mut read))?;
            if read.filled().is_empty() {
                // The client closed mid-head: hand on what there is, as without the checks.
                this.frame = Frame::Through;
                if this.pending.is_empty() {
                    return Poll::Ready(Ok(()));
                }
                continue;
            }
            this.pending.extend_from_slice(read.filled());
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Checked<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    /// Writes the answer to a refused head, if any, then shuts the socket down.
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Some((answer, written)) = &mut this.refused {
            while *written < answer.len() {
                let n = ready!(Pin::new(&mut this.io).poll_write(cx, &answer[*written..]))?;
                if n == 0 {
                    return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                }
                *written += n;
            }
            ready!(Pin::new(&mut this.io).poll_flush(cx))?;
        }
        Pin::new(&mut this.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(head: &[u8]) -> Option<u16> {
        match check_head(head) {
            Verdict::Refused(r) => Some(r.status),
            _ => None,
        }
    }

    /// A connection that delivers `input` at most `max` bytes per read and keeps what is
    /// written to it.
    struct Trickle {
        input: Vec<u8>,
        at: usize,
        max: usize,
        written: Vec<u8>,
        shut: bool,
        /// At the end of `input`: wait (a client that stopped sending), not end of stream.
        hang: bool,
    }

    impl AsyncRead for Trickle {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            if self.hang && self.at == self.input.len() {
                return Poll::Pending;
            }
            let n = self
                .max
                .min(buf.remaining())
                .min(self.input.len() - self.at);
            let at = self.at;
            buf.put_slice(&self.input[at..at + n]);
            self.at += n;
            Poll::Ready(Ok(()))
        }
    }

    impl AsyncWrite for Trickle {
        fn poll_write(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            self.written.extend_from_slice(buf);
            Poll::Ready(Ok(buf.len()))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            self.shut = true;
            Poll::Ready(Ok(()))
        }
    }

    /// What `input`, read `max` bytes at a time, hands on, and what shutting down writes.
    async fn through(input: &[u8], max: usize) -> (Vec<u8>, String) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut checked = Checked::new(
            Trickle {
                input: input.to_vec(),
                at: 0,
                max,
                written: Vec::new(),
                shut: false,
                hang: false,
            },
            Duration::from_secs(60),
        );
        let mut out = Vec::new();
        checked.read_to_end(&mut out).await.unwrap();
        checked.shutdown().await.unwrap();
        assert!(checked.io.shut);
        (out, String::from_utf8(checked.io.written).unwrap())
    }

    #[tokio::test]
    async fn good_requests_pass_unchanged_however_they_are_split() {
        let good = [
            &b"GET /a HTTP/1.1\r\nHost: gc\r\n\r\n"[..],
            b"POST /b HTTP/1.1\r\nHost: gc\r\nContent-Length: 10\r\n\r\n0123456789",
            b"\r\nGET /c HTTP/1.1\r\nHost: gc\r\nContent-Length: 0\r\n\r\n",
            b"POST /d HTTP/1.1\r\nHost: gc\r\nContent-Length: 3\r\n\r\nGET",
        ]
        .concat();
        let chunked = [
            &good[..],
            b"POST /e HTTP/1.1\r\nHost: gc\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
            // Not checked after a chunked body: handed on as it is.
            b"GET /f HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
        ]
        .concat();
        for max in [1, 2, 5, 17, 64, 8192] {
            for input in [&good, &chunked] {
                let (out, written) = through(input, max).await;
                assert_eq!(out, *input, "max {max}");
                assert!(written.is_empty(), "{written}");
            }
        }
    }

    #[tokio::test]
    async fn a_bad_head_ends_the_stream_and_is_answered_at_shutdown() {
        let good = b"GET /a HTTP/1.1\r\nHost: gc\r\n\r\nPOST /b HTTP/1.1\r\nHost: gc\r\nContent-Length: 4\r\n\r\nabcd";
        let bad = b"POST /c HTTP/1.1\r\nHost: gc\r\nX-Request-Id: r-1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nxGET /d HTTP/1.1\r\nHost: gc\r\n\r\n";
        let input = [&good[..], &bad[..]].concat();
        for max in [1, 3, 8192] {
            let (out, written) = through(&input, max).await;
            assert_eq!(out, good, "max {max}");
            assert!(
                written.starts_with("HTTP/1.1 400 Bad Request\r\n"),
                "{written}"
            );
            assert!(written.contains("\r\nx-request-id: r-1\r\n"), "{written}");
            assert!(written.contains("\r\nconnection: close\r\n"), "{written}");
            let body = written.split("\r\n\r\n").nth(1).unwrap();
            let body: serde_json::Value = serde_json::from_str(body).unwrap();
            assert_eq!(body["error"]["code"], "bad_request");
            assert_eq!(body["error"]["request_id"], "r-1");
            assert!(body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("more than one Content-Length"));
        }
    }

    #[tokio::test]
    async fn a_late_first_head_is_answered_408() {
        let mut checked = Checked::new(
            Trickle {
                input: b"GET / HTTP/1.1\r\nHost".to_vec(),
                at: 0,
                max: 4,
                written: Vec::new(),
                shut: false,
                hang: true,
            },
            Duration::from_millis(100),
        );
        let mut buf = [0u8; 64];
        let mut read = ReadBuf::new(&mut buf);
        // The partial head is held back, and the connection waits for more.
        let polled =
            std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut checked).poll_read(cx, &mut read)))
                .await;
        assert!(polled.is_pending(), "{polled:?} {:?}", checked.refused);
        assert!(read.filled().is_empty());
        tokio::time::sleep(Duration::from_millis(150)).await;
        let mut out = Vec::new();
        tokio::io::AsyncReadExt::read_to_end(&mut checked, &mut out)
            .await
            .unwrap();
        assert!(out.is_empty());
        tokio::io::AsyncWriteExt::shutdown(&mut checked)
            .await
            .unwrap();
        let written = String::from_utf8(checked.io.written).unwrap();
        assert!(
            written.starts_with("HTTP/1.1 408 Request Timeout\r\n"),
            "{written}"
        );
        assert!(
            written.contains("\"code\":\"request_timeout\""),
            "{written}"
        );
    }

    /// The cost of the check on a head like a `POST /api/v1/run` from an SDK, and that the same
    /// head gets the same verdict every time. In the test run it checks 10,000 heads; to
    /// measure, run `GC_HEAD_CHECK_N=1000000 cargo test --release -p gc-server --lib
    /// head_check_cost -- --nocapture` (under `valgrind --tool=callgrind` for instructions).
    #[test]
    fn head_check_cost() {
        let head = b"POST /api/v1/run HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: gc-python/0.1\r\nAccept: */*\r\nAccept-Encoding: gzip\r\nAuthorization: Bearer gck_0123456789abcdef0123456789abcdef0123456789abcdef\r\nContent-Type: application/json\r\nContent-Length: 96\r\n\r\n";
        let n: u32 = std::env::var("GC_HEAD_CHECK_N")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(10_000);
        let started = std::time::Instant::now();
        for _ in 0..n {
            let verdict = check_head(std::hint::black_box(&head[..]));
            assert!(matches!(verdict, Verdict::Complete(_, Frame::Body(96))));
        }
        eprintln!(
            "check_head: {} bytes, {:.0} ns per head",
            head.len(),
            started.elapsed().as_nanos() as f64 / f64::from(n)
        );
    }

    #[test]
    fn heads_are_checked_as_actix_http_checks_them() {
        let ok = b"GET /api/v1/health HTTP/1.1\r\nHost: gc\r\n\r\n";
        assert_eq!(check_head(ok), Verdict::Complete(ok.len(), Frame::Head));
        assert_eq!(check_head(&ok[..20]), Verdict::Partial);
        let post = b"POST /x HTTP/1.1\r\nHost: gc\r\nContent-Length: 2\r\n\r\n{}";
        assert_eq!(
            check_head(post),
            Verdict::Complete(post.len() - 2, Frame::Body(2))
        );
        let chunked = b"POST /x HTTP/1.1\r\nHost: gc\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert!(matches!(
            check_head(chunked),
            Verdict::Complete(_, Frame::Through)
        ));
        for (head, code) in [
            (&b"GET / HTTP/1.1 extra\r\nHost: gc\r\n\r\n"[..], 400),
            (b"GET / HTTP/9.9\r\nHost: gc\r\n\r\n", 400),
            (b"GET /\x01 HTTP/1.1\r\nHost: gc\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost: gc\r\nX: a\x01b\r\n\r\n", 400),
            (
                b"POST / HTTP/1.1\r\nHost: gc\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n",
                400,
            ),
            (
                b"POST / HTTP/1.1\r\nHost: gc\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n",
                400,
            ),
            (b"POST / HTTP/1.1\r\nHost: gc\r\nContent-Length: +2\r\n\r\n", 400),
            (b"POST / HTTP/1.1\r\nHost: gc\r\nTransfer-Encoding: gzip\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\n\r\n", 400),
            (b"POST / HTTP/1.0\r\n\r\n", 400),
        ] {
            assert_eq!(status(head), Some(code), "{}", String::from_utf8_lossy(head));
        }
        let mut many = b"GET / HTTP/1.1\r\nHost: gc\r\n".to_vec();
        for i in 0..100 {
            many.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
        }
        assert_eq!(status(&many), Some(431));
        let mut long = b"GET / HTTP/1.1\r\nHost: gc\r\nX-Long: ".to_vec();
        long.resize(MAX_HEAD, b'a');
        assert_eq!(status(&long), Some(431));
        // HTTP/1.0 without Host, and an id from the client, are fine.
        assert!(matches!(
            check_head(b"GET / HTTP/1.0\r\n\r\n"),
            Verdict::Complete(_, Frame::Head)
        ));
        match check_head(b"GET / HTTP/1.1\r\nX-Request-Id: abc-1\r\n\r\n") {
            Verdict::Refused(r) => assert_eq!(r.request_id.as_deref(), Some("abc-1")),
            other => panic!("{other:?}"),
        }
    }
}
