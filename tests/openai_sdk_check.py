"""The official OpenAI Python SDK against gc's `/api/v1` (issue 10), one phase per call.

Run by the black-box test `the_official_openai_python_sdk_...` in `tests/tests/gateway.rs`,
which starts gc and the mock upstream, queues the mock's answers and counts its calls between
phases. Usage: `python openai_sdk_check.py PHASE` with `GC_BASE_URL` (`.../api/v1`) and
`GC_API_KEY` (a workspace key with the `run` scope) in the environment. Exits non-zero, with
the reason, when the SDK does not see what an OpenAI client expects.
"""

import os
import sys

import openai
from openai import OpenAI

CHAT = [{"role": "user", "content": "hello"}]


def client(**options):
    return OpenAI(base_url=os.environ["GC_BASE_URL"], api_key=os.environ["GC_API_KEY"], **options)


def models_and_stream():
    c = client()
    ids = [m.id for m in c.models.list()]
    assert ids == ["auto", "gpt-4o-mini", "gpt-4o", "text-embedding-3-small"], ids
    assert c.models.retrieve("gpt-4o").id == "gpt-4o"
    try:
        c.models.retrieve("no-such-model")
        raise AssertionError("an unknown model was found")
    except openai.NotFoundError:
        pass
    reply = c.chat.completions.create(model="auto", messages=CHAT, max_tokens=16)
    assert reply.choices[0].message.content, reply
    # A stream without include_usage: every chunk has a choice (client code reading
    # chunk.choices[0] must not crash on a usage-only chunk).
    chunks = list(c.chat.completions.create(model="auto", messages=CHAT, stream=True))
    assert chunks, "no chunk"
    for chunk in chunks:
        assert chunk.choices, chunk
        chunk.choices[0].delta  # what client code reads
    # Asked for, the usage arrives as the SDK documents: a last chunk with no choice.
    chunks = list(
        c.chat.completions.create(
            model="auto", messages=CHAT, stream=True, stream_options={"include_usage": True}
        )
    )
    assert chunks[-1].usage is not None and chunks[-1].choices == [], chunks[-1]


def upstream_429():
    # The SDK's own retries (2 by default) are the only ones: the test counts the upstream's
    # calls. Retry-After is honoured, so this takes about two seconds.
    c = client()
    try:
        c.chat.completions.create(model="auto", messages=CHAT)
        raise AssertionError("an upstream 429 was not passed on")
    except openai.RateLimitError as e:
        assert e.status_code == 429, e
        assert e.response.headers.get("retry-after") == "1", e.response.headers
        assert e.code == "upstream_rate_limited", e.code


def quota_429():
    # gc's own per-minute limit (1 request): the first passes, the next is refused with the
    # headers OpenAI sends. No retries here: Retry-After is up to a minute.
    c = client(max_retries=0)
    raw = c.chat.completions.with_raw_response.create(model="auto", messages=CHAT)
    assert raw.headers.get("x-ratelimit-limit-requests") == "1", raw.headers
    assert raw.headers.get("x-ratelimit-remaining-requests") == "0", raw.headers
    # The next request is refused; if a minute began in between, the one after it is.
    for attempt in range(2):
        try:
            c.chat.completions.create(model="auto", messages=CHAT)
        except openai.RateLimitError as e:
            assert e.code == "rate_limited", e.code
            assert 1 <= int(e.response.headers["retry-after"]) <= 60, e.response.headers
            assert e.response.headers.get("x-ratelimit-remaining-requests") == "0"
            return attempt
    raise AssertionError("two more requests of a minute limited to one were admitted")


def budget_429():
    # A spent monthly budget: `insufficient_quota` with `x-should-retry: false`, so the SDK
    # does not retry it even with its default retries (the test counts gc's refusals).
    c = client()
    try:
        c.chat.completions.create(model="auto", messages=CHAT)
        raise AssertionError("a request over the monthly budget was admitted")
    except openai.RateLimitError as e:
        assert e.code == "budget_exhausted", e.code
        assert e.type == "insufficient_quota", e.type


def responses_and_embeddings():
    # Issue 32: the Responses API, plain and streamed, and embeddings, as the SDK calls them
    # (the mock answers: "Hello from the mock." with usage 5/7, a 3-chunk stream, and
    # 3-dimension embeddings, base64 being the SDK's default encoding).
    c = client()
    r = c.responses.create(model="auto", input="hello", max_output_tokens=16)
    assert r.output_text == "Hello from the mock.", r
    assert (r.usage.input_tokens, r.usage.output_tokens) == (5, 7), r.usage
    events = list(c.responses.create(model="auto", input="hello", stream=True))
    types = [e.type for e in events]
    assert types[0] == "response.created" and types[-1] == "response.completed", types
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == "chunk-0 chunk-1 chunk-2 ", text
    assert events[-1].response.usage.output_tokens == 3, events[-1]
    # The SDK's stream helper rebuilds the response from the events.
    with c.responses.stream(model="auto", input=[{"role": "user", "content": "hello"}]) as stream:
        final = stream.get_final_response()
    assert final.output_text == "chunk-0 chunk-1 chunk-2 ", final
    e = c.embeddings.create(model="text-embedding-3-small", input=["hello", "world"])
    assert len(e.data) == 2 and len(e.data[1].embedding) == 3, e
    assert abs(e.data[0].embedding[1] - 0.2) < 1e-6, e.data[0].embedding
    assert e.usage.prompt_tokens == 5, e.usage
    e = c.embeddings.create(model="text-embedding-3-small", input="hello", encoding_format="float")
    assert e.data[0].embedding == [0.1, 0.2, 0.3] or len(e.data[0].embedding) == 3, e
    # gc's refusals in OpenAI's shape: `auto` names no embeddings model.
    try:
        c.embeddings.create(model="auto", input="hello")
        raise AssertionError("embeddings with model auto were admitted")
    except openai.UnprocessableEntityError as err:
        assert err.code == "validation_failed", err.code
    try:
        c.responses.create(model="auto", input=[])
        raise AssertionError("a response without input was admitted")
    except openai.UnprocessableEntityError as err:
        assert err.code == "validation_failed", err.code


def allow_list():
    # Issue 32 (decision 0038): a model outside the caller's allow-list is refused before any
    # upstream call with 403 `model_not_allowed`, which the SDK raises as
    # PermissionDeniedError (never retried: a 4xx other than 408/409/429).
    c = client()
    try:
        c.chat.completions.create(model="claude-3-5-sonnet", messages=CHAT)
        raise AssertionError("a model outside the allow-list was admitted")
    except openai.PermissionDeniedError as e:
        assert e.status_code == 403, e
        assert e.code == "model_not_allowed", e.code


def spend_429():
    # A spent monthly spend limit: 429 `budget_exhausted` with `x-should-retry: false`, so
    # the SDK does not retry it even with its default retries (the test counts refusals).
    c = client()
    try:
        c.chat.completions.create(model="auto", messages=CHAT, max_tokens=16)
        raise AssertionError("a request over the monthly spend limit was admitted")
    except openai.RateLimitError as e:
        assert e.code == "budget_exhausted", e.code
        assert e.response.headers.get("x-should-retry") == "false", e.response.headers


PHASES = {
    "allow-list": allow_list,
    "spend-429": spend_429,
    "responses-and-embeddings": responses_and_embeddings,
    "models-and-stream": models_and_stream,
    "upstream-429": upstream_429,
    "quota-429": quota_429,
    "budget-429": budget_429,
}

if __name__ == "__main__":
    # The last line is what the test reads: the phase and how many more requests it had
    # admitted than planned (only the quota phase, across a minute boundary).
    extra = PHASES[sys.argv[1]]() or 0
    print(f"openai {openai.__version__}")
    print(f"ok {sys.argv[1]} {extra}")
