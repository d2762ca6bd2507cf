"""LLM-as-judge: the metric VRAG's papers report (binary accuracy judged by an LLM).

String metrics undercount a VLM that answers "about 341 million dollars"; the papers therefore
score with a judge model. This client talks to any OpenAI-compatible `/v1/chat/completions`
(vLLM, SGLang, DashScope, OpenAI), retries transient failures with backoff, and never raises:
a judge outage becomes `score=None` with the error, so a long evaluation is not lost to it.
The same judge is the RL reward's outcome judge (`vrag_rl.training.rewards`).
"""
from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass

from vrag_rl.agent.policies.openai_http import OpenAIPolicy
from vrag_rl.agent.policy import PolicyError, SamplingParams

DEFAULT_MAX_TOKENS = 4096

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


def _root_cause(exc: BaseException) -> BaseException:
    while exc.__cause__ is not None and exc.__cause__ is not exc:
        exc = exc.__cause__
    return exc


class LLMJudge:
    """Scores (question, reference, prediction) triples with a chat model behind any OpenAI-compatible API.

    The HTTP call goes through `OpenAIPolicy`, the project's one OpenAI client (it validates the
    raw response, so a malformed body is a clear error, never a crash). Retries are bounded and
    counted here — `max_retries` more attempts with exponential backoff on connection errors,
    timeouts, 429 and 5xx — because an unbounded retry loop is how upstream's judge hung training.
    The RL reward's outcome judge (`vrag_rl.training.rewards.outcome`) is this class.
    """

    def __init__(self, base_url: str, model: str, api_key: str | None = None, timeout: float = 60,
                 max_retries: int = 3, backoff_s: float = 1.0, max_tokens: int | None = None,
                 prompt: str = JUDGE_PROMPT):
        self.base_url = base_url
        self.model = model
        self.api_key = api_key
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_tokens = max_tokens  # None: a generous cap, so thinking models can finish their reasoning
        self.prompt = prompt
        self._policy: OpenAIPolicy | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _get_policy(self) -> OpenAIPolicy:
        # The client is bound to the event loop that made it; `run_evaluation` makes a new loop per
        # call, so rebuild rather than reuse a client from a closed loop.
        loop = asyncio.get_running_loop()
        if self._policy is None or self._loop is not loop:
            self._policy = OpenAIPolicy(self.base_url, model=self.model, api_key=self.api_key, timeout=self.timeout,
                                        max_retries=0)
            self._loop = loop
        return self._policy

    async def aclose(self) -> None:
        if self._policy is not None and self._loop is asyncio.get_running_loop():
            await self._policy.aclose()
        self._policy, self._loop = None, None

    def messages(self, question: str, reference: str | list[str], prediction: str) -> list[dict]:
        ref = " | ".join(reference) if isinstance(reference, list) else reference
        return [{"role": "user", "content": self.prompt.format(question=question, reference=ref,
                                                               prediction=prediction)}]

    async def ajudge(self, question: str, reference: str | list[str], prediction: str | None) -> JudgeVerdict:
        """Judge one answer; an empty prediction is wrong without asking the model. Never raises."""
        if prediction is None or not str(prediction).strip():
            return JudgeVerdict(score=0.0, raw="", error=None)
        messages = self.messages(question, reference, str(prediction))
        sampling = SamplingParams(temperature=0.0, max_tokens=self.max_tokens or DEFAULT_MAX_TOKENS)
        last_error = ""
        for attempt in range(self.max_retries + 1):
            try:
                reply = await self._get_policy().complete(messages, sampling)
            except PolicyError as exc:
                last_error = f"{exc} ({type(_root_cause(exc)).__name__})"
                if not exc.retryable:  # connection errors, timeouts, 429, 5xx are; 4xx and bad bodies not
                    return JudgeVerdict(score=None, raw="", error=last_error)
                if attempt < self.max_retries:
                    await asyncio.sleep(self.backoff_s * 2**attempt)
                continue
            score = parse_verdict(reply.text)
            return JudgeVerdict(score=score, raw=reply.text,
                                error=None if score is not None else "unparseable verdict")
        return JudgeVerdict(score=None, raw="", error=f"judge failed after {self.max_retries + 1} attempts: "
                                                       f"{last_error}")
