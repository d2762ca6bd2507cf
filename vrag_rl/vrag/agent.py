"""`VRAG`: the public agent class — `run`, `stream`, `arun`, `astream`, `run_batch`.

The loop is `Episode` (`vrag_rl/vrag/loop.py`); the entry points, the clients per event loop and
the private event loop that lets `run()` reuse them across calls are `AgentFrontend`'s, shared with
VimRAG. What is VRAG's own: its episode, and upstream's call styles (`generator=`).
"""
from __future__ import annotations

from typing import Any

from search_engine.client import SearchClient
from vrag_rl.agent.events import AnswerEvent, CropEvent, SearchEvent, SearchResultsEvent, ThinkEvent
from vrag_rl.agent.frontend import AgentFrontend
from vrag_rl.agent.images import draw_box
from vrag_rl.agent.policy import Policy
from vrag_rl.vrag.config import AgentConfig
from vrag_rl.vrag.loop import Episode
from vrag_rl.vrag.prompts import Prompts
from vrag_rl.vrag.result import EpisodeResult


class EpisodeFailedError(RuntimeError):
    """Raised by upstream's `generator=False` call style when the episode ended without an answer.

    `result` holds the whole `EpisodeResult` (status, error, trajectory) for inspection.
    """

    def __init__(self, result: EpisodeResult):
        super().__init__(f"episode {result.episode_id} {result.status}: {result.error or 'no answer'}")
        self.result = result


class VRAG(AgentFrontend[EpisodeResult]):
    """A visual RAG agent over a policy and a search server.

    `VRAG(base_url="http://localhost:8001/v1", search_url="http://localhost:8002")` talks to an
    OpenAI-compatible endpoint; `VRAG(policy=my_policy, search_url=...)` drives any object with the
    `Policy` interface (an in-process model, a token recorder for training). `search_url` may also
    be upstream's `.../search`. Keyword arguments not listed below are `AgentConfig` fields
    (`max_turns`, `search_top_k`, `max_pixels`, `crop_padding`, ...).

    Upstream compatibility: `VRAG(base_url, search_url, generator=False).run(q)` returns the answer
    string (and raises `EpisodeFailedError` when there is none, never returns a silent `None`);
    `generator=True` makes `run` yield upstream's `(kind, content, raw)` tuples.

    Call `close()` (or use `with VRAG(...) as agent:`) to release connections early.
    """

    def __init__(self, base_url: str = "http://localhost:8001/v1", search_url: str = "http://localhost:8002",
                 model: str | None = None, api_key: str | None = None, search_api_key: str | None = None,
                 generator: bool | None = None, config: AgentConfig | None = None, prompts: Prompts | None = None,
                 policy: Policy | None = None, **config_overrides: Any):
        base = config or AgentConfig()
        config = AgentConfig(**{**base.to_dict(), **config_overrides}) if config_overrides else base
        super().__init__(base_url, search_url, model, api_key, search_api_key, config, policy,
                         jpeg_quality=config.jpeg_quality)
        self.generator = generator
        self.prompts = prompts or Prompts()

    def _new_episode(self, question: str, config: AgentConfig, policy: Policy, search: SearchClient) -> Episode:
        return Episode(question, config, self.prompts, policy, search, pages=self.pages)

    def _failure(self, question: str, error: str) -> EpisodeResult:
        return EpisodeResult.failure(question, error)

    def run(self, question: str, stream: bool = False, **overrides: Any):
        """EpisodeResult (default); an event iterator with stream=True; upstream's shapes with generator=."""
        if self.generator is True:
            return self._upstream_generator(question)
        if stream:
            return self.stream(question, **overrides)
        result = self._loop().run(self.arun(question, **overrides))
        if self.generator is False:
            if not result.answered:
                raise EpisodeFailedError(result)
            return result.answer
        return result

    def _upstream_generator(self, question: str):
        """Upstream's event tuples; the final answer is also the generator's return value."""
        answer = None
        for event in self.stream(question):
            if isinstance(event, ThinkEvent):
                yield ("think", event.text, f"<think>{event.text}</think>")
            elif isinstance(event, SearchEvent):
                text = " | ".join(event.queries)
                yield ("search", text, f"<search>{text}</search>")
            elif isinstance(event, SearchResultsEvent):
                for ref in event.shown:
                    yield ("search_image", ref.image, "")
            elif isinstance(event, CropEvent) and event.crop is not None and event.source is not None:
                yield ("bbox", str(event.bbox), f"<bbox>{event.bbox}</bbox>")  # upstream's name for a crop
                x1, y1, x2, y2 = (int(v) for v in event.bbox)
                source = event.source.image
                source_with_box = draw_box(source, (x1, y1, x2, y2)) if source is not None else None
                yield ("crop_image", event.crop.image, source_with_box)
            elif isinstance(event, AnswerEvent):
                answer = event.answer
                yield ("answer", event.answer, f"<answer>{event.answer}</answer>")
        return ("answer", answer or self.prompts.no_answer, "")

