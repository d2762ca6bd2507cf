"""LLM-as-judge: the metric VRAG's papers report (binary accuracy judged by an LLM).

String metrics undercount a VLM that answers "about 341 million dollars"; the papers therefore
score with a judge model. This client talks to any OpenAI-compatible `/v1/chat/completions`
(vLLM, SGLang, DashScope, OpenAI), retries transient failures with backoff, and never raises:
a judge outage becomes `score=None` with the error, so a long evaluation is not lost to it.
"""
from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass

import httpx

JUDGE_PROMPT = """You grade answers to questions about documents.

Question: {question}
Reference answer: {reference}
Candidate answer: {prediction}

Decide whether the candidate answer gives the same answer as the reference. Ignore wording, \
formatting, units written differently and extra correct detail; numbers must agree up to \
rounding. A candidate that contradicts the reference, misses its key fact or does not answer \
is wrong.
Reply with exactly one word: True if the candidate is correct, False otherwise."""

_VERDICT = re.compile(r"\b(true|false|yes|no|correct|incorrect|wrong|right|1|0)\b", re.IGNORECASE)
_POSITIVE = {"true", "yes", "correct", "right", "1"}
_THINK = re.compile(r"<think>.*?</think>", re.IGNORECASE | re.DOTALL)
_JUDGE_TAG = re.compile(r"<judge>(.*?)</judge>", re.IGNORECASE | re.DOTALL)


@dataclass
class JudgeVerdict:
    """score is 1.0/0.0, or None when the judge could not be reached or understood."""

    score: float | None
    raw: str = ""
    error: str | None = None


def parse_verdict(text: str) -> float | None:
    """First verdict word of the reply (reasoning blocks dropped, a <judge> tag preferred)."""
    text = _THINK.sub(" ", text or "")
    tagged = _JUDGE_TAG.search(text)
    match = _VERDICT.search(tagged.group(1) if tagged else text)
    if match is None:
        return None
    return 1.0 if match.group(1).lower() in _POSITIVE else 0.0


def _chat_url(base_url: str) -> str:
    url = base_url.rstrip("/")
    if url.endswith("/chat/completions"):
        return url
    if url.endswith("/v1"):
        return url + "/chat/completions"
    return url + "/v1/chat/completions"


class _Retryable(Exception):
    pass


class LLMJudge:
    """Scores (question, reference, prediction) triples with a chat model."""

    def __init__(self, base_url: str, model: str, api_key: str | None = None, timeout: float = 60,
                 max_retries: int = 3, backoff_s: float = 1.0, max_tokens: int | None = None):
        self.url = _chat_url(base_url)
        self.model = model
        self.api_key = api_key
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_tokens = max_tokens  # None: let thinking models finish their reasoning
        self._client: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _get_client(self) -> httpx.AsyncClient:
        # A client is bound to the event loop that made it; `run_evaluation` makes a new loop
        # per call, so rebuild rather than reuse a client from a closed loop.
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
            self._client = httpx.AsyncClient(timeout=self.timeout, headers=headers)
            self._loop = loop
        return self._client

    async def aclose(self) -> None:
        if self._client is not None and self._loop is asyncio.get_running_loop():
            await self._client.aclose()
        self._client, self._loop = None, None

    def _payload(self, question: str, reference: str | list[str], prediction: str) -> dict:
        ref = " | ".join(reference) if isinstance(reference, list) else reference
        prompt = JUDGE_PROMPT.format(question=question, reference=ref, prediction=prediction)
        payload: dict = {"model": self.model, "messages": [{"role": "user", "content": prompt}],
                         "temperature": 0.0}
        if self.max_tokens is not None:
            payload["max_tokens"] = self.max_tokens
        return payload

    async def _post_once(self, payload: dict) -> str:
        try:
            response = await self._get_client().post(self.url, json=payload)
        except (httpx.TransportError, httpx.TimeoutException) as exc:
            raise _Retryable(f"{type(exc).__name__}: {exc}") from exc
        if response.status_code >= 500 or response.status_code == 429:
            raise _Retryable(f"HTTP {response.status_code}: {response.text[:200]}")
        if response.status_code >= 400:
            raise RuntimeError(f"HTTP {response.status_code}: {response.text[:200]}")
        content = response.json()["choices"][0]["message"]["content"]
        return content or ""

    async def ajudge(self, question: str, reference: str | list[str], prediction: str | None) -> JudgeVerdict:
        """Judge one answer; an empty prediction is wrong without asking the model."""
        if prediction is None or not str(prediction).strip():
            return JudgeVerdict(score=0.0, raw="", error=None)
        payload = self._payload(question, reference, str(prediction))
        last_error = ""
        for attempt in range(self.max_retries + 1):
            try:
                raw = await self._post_once(payload)
            except _Retryable as exc:
                last_error = str(exc)
                if attempt < self.max_retries:
                    await asyncio.sleep(self.backoff_s * 2**attempt)
                continue
            except Exception as exc:  # 4xx, malformed JSON: retrying will not help
                return JudgeVerdict(score=None, raw="", error=f"{type(exc).__name__}: {exc}")
            score = parse_verdict(raw)
            return JudgeVerdict(score=score, raw=raw, error=None if score is not None else "unparseable verdict")
        return JudgeVerdict(score=None, raw="", error=f"judge failed after {self.max_retries + 1} attempts: "
                                                       f"{last_error}")
