"""VimRAG as a rollout environment: the demo's `VimEpisode`, recorded one training sample per model call.

VimRAG rebuilds its context from the memory graph at every model call, so its trajectory is not one growing
conversation: it is a list of turns, each with its own prompt (graph JSON + the memory images the energy
budget kept) and its own response. `run_vim_episode` drives the one episode engine (`vimrag.agent.VimEpisode`,
the same class as the demo and the evaluation) with `TurnRecordingPolicy` over the trainer's generate function
and returns a `VimTrajectory`: its `turns` are `TurnSample`s — each a `Trajectory` of one model turn (so the
training forward, `model_inputs` and the image-token check are the VRAG path's, unchanged) that carries its
turn index and the memory-graph node(s) it built. All turns of a trajectory share its outcome (`reward`) and
its group (`group_id`).

Budgets in training (`prompt_budgeted`, `energy_for_prompt_length`): a turn's prompt never exceeds the
configured prompt length — the memory buffer (`EnergyConfig.total_pixels`) is sized so that the text, the
turn's search observations and the memory images fit, the energy allocation then decides which memory images
stay and how sharp, and a prompt that still would not fit ends the episode explicitly (`PromptBudgetError`,
status "failed") instead of being truncated. What a turn is trained on is what the model saw: the recorder
keeps the very images (after their resize) that went to the generate function, and their token count is
checked against the ids in the forward (`model_inputs`).
"""
from __future__ import annotations

import asyncio
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from search_engine.client import SearchClient
from vimrag.agent import VimEpisode
from vimrag.config import VimRAGConfig
from vimrag.graph import MemoryGraph
from vimrag.prompts import VimPrompts
from vimrag.result import VimRAGResult
from vrag_rl.agent.credit_graph import CreditGraph, GraphNode
from vrag_rl.agent.page_images import PageImageStore
from vrag_rl.agent.policies.token_recorder import GenerateFn, GenerateOutput
from vrag_rl.agent.policies.turn_recorder import RecordedTurn, TurnRecordingPolicy
from vrag_rl.agent.policy import PolicyError, SamplingParams
from vrag_rl.agent.result import TurnRecord
from vrag_rl.training.algos.ggpo import ggpo_turn_mask, turn_nodes
from vrag_rl.training.algos.settings import AlgorithmSettings
from vrag_rl.training.rollout.task import RolloutTask, episode_seed
from vrag_rl.training.rollout.trajectory import Trajectory

IMAGE_FACTOR = 28  # Qwen-VL: one image token per merged 28×28 patch


class PromptBudgetError(PolicyError):
    """A turn's prompt is longer than the configured prompt length; the turn is not sent, the episode fails."""


def prompt_budgeted(generate: GenerateFn, max_prompt_length: int | None) -> GenerateFn:
    """`generate` that refuses (explicitly, never by truncation) a prompt longer than `max_prompt_length` ids."""
    if max_prompt_length is None:
        return generate

    async def checked(prompt_ids: list[int], sampling: SamplingParams, images: list[Any]) -> GenerateOutput:
        if len(prompt_ids) > max_prompt_length:
            raise PromptBudgetError(f"the turn's prompt has {len(prompt_ids)} tokens, more than the prompt length "
                                    f"{max_prompt_length}; lower energy.total_pixels / observation_max_pixels or "
                                    "raise the prompt length")
        return await generate(prompt_ids, sampling, images)

    return checked


def energy_for_prompt_length(config: VimRAGConfig, prompt_length: int, text_tokens: int,
                             factor: int = IMAGE_FACTOR) -> VimRAGConfig:
    """`config` with the memory buffer cut so that text + this turn's observations + memory fit `prompt_length`.

    A turn's prompt holds at most: `text_tokens` of text (system, question, graph JSON, the reply and the
    tool response's text — the caller's bound), the observations of one search turn (`max_searches_per_turn`
    × `search_top_k` pages at `observation_max_pixels`), and the memory images (`energy.total_pixels` shared
    by energy). The memory buffer gets what is left; the energy allocation then chooses which images stay.
    Raises `ValueError` when text and observations alone do not fit.
    """
    per_token = factor * factor
    observations = config.max_searches_per_turn * config.search_top_k * (config.observation_max_pixels // per_token)
    left = prompt_length - text_tokens - observations
    if left <= 0:
        raise ValueError(f"prompt length {prompt_length} cannot hold {text_tokens} text tokens and {observations} "
                         "observation image tokens; lower observation_max_pixels, search_top_k or "
                         "max_searches_per_turn")
    total = min(config.energy.total_pixels, left * per_token)
    return replace(config, energy=replace(config.energy, total_pixels=total))


@dataclass
class TurnSample(Trajectory):
    """One model call of a VimRAG trajectory as a training sample (a one-turn `Trajectory`).

    `turn` is the call's index (= `TurnRecord.index`); `node_ids` the memory-graph nodes the call built (empty
    for an unusable reply); `result` is the whole episode's, shared by its turns.
    """

    result: Any  # the episode's `VimRAGResult`, shared by its turns (the training forward reads none of it)
    turn: int = 0
    node_ids: tuple[str, ...] = ()


def memory_credit_graph(graph: MemoryGraph) -> CreditGraph:
    """The memory graph as GGPO's turn graph for training: a node's evidence is every page its *retrieval
    returned* (`retrieved_ids`) and what it memorised — R_val is "the nodes whose retrieval hit a reference page".

    (`MemoryGraph.to_credit_graph`, the evaluation's view, lists memorised items only.)
    """
    nodes = [GraphNode(n.node_id, tuple(n.parent_ids), n.kind, tuple(n.turn_indices),
                      tuple(dict.fromkeys([*n.retrieved_ids, *(i.ref_id for i in n.items)])))
             for n in graph.nodes.values() if n.kind != "root"]
    return CreditGraph.build(nodes, graph.answer_id)


def turn_state_keys(records: Sequence[TurnRecord], num_turns: int) -> list[Hashable]:
    """GiGPO's anchor state before each turn: (the sub-queries issued so far, the set of pages they returned).

    Two trajectories of a group are in the same state when they searched the same things and saw the same
    pages, whatever words their summaries used.
    """
    keys: list[Hashable] = []
    queries: list[str] = []
    pages: set[str] = set()
    by_index = {r.index: r for r in records}
    for t in range(num_turns):
        keys.append((tuple(queries), frozenset(pages)))
        record = by_index.get(t)
        if record is not None:
            queries.extend(q.strip().lower() for q in record.queries)
            pages.update(p for hits in record.retrieved for p in hits)
    return keys


@dataclass
class VimTrajectory:
    """One VimRAG episode: its turns (each a training sample), the episode result, the shared reward."""

    group_id: str
    index: int
    turns: list[TurnSample]
    result: VimRAGResult
    seed: int | None = None
    reward: Any = None  # a RewardBreakdown once scored, shared by every turn
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def turn_records(self) -> list[TurnRecord]:
        return self.result.turn_records

    @property
    def num_turns(self) -> int:
        return len(self.turns)

    @property
    def num_model_tokens(self) -> int:
        return sum(len(s.response_ids) for s in self.turns)

    @property
    def response_ids(self) -> list[int]:
        return [t for s in self.turns for t in s.response_ids]

    @property
    def images(self) -> list[Any]:
        return [i for s in self.turns for i in s.images]

    @property
    def credit_graph(self) -> CreditGraph:
        return memory_credit_graph(self.result.graph)

    def pruned_turns(self, settings: AlgorithmSettings, outcome: float | None,
                     reference_pages: Sequence[str], advantages: Sequence[float] | None = None) -> list[int]:
        """GGPO's dropped turns (μ_t = 1) on the memory graph, sign-gated by the turns' `advantages` when given
        (`vrag_rl.training.algos.ggpo.gate_by_advantage`); none for GRPO / GSPO or an unscored episode."""
        if not settings.prunes or outcome is None:
            return []
        mu = ggpo_turn_mask(self.credit_graph, len(self.turns), settings.is_correct(outcome), reference_pages,
                            advantages)
        return [t for t, dropped in enumerate(mu) if dropped]

    def state_keys(self) -> list[Hashable]:
        return turn_state_keys(self.result.turn_records, len(self.turns))

    def summary(self) -> dict[str, Any]:
        """A JSON-ready record of the episode (no tensors, no pixels)."""
        return {"group_id": self.group_id, "index": self.index, "seed": self.seed, "status": self.result.status,
                "answer": self.result.answer, "turns": len(self.turns), "model_tokens": self.num_model_tokens,
                "prompt_tokens": [len(s.prompt_ids) for s in self.turns],
                "images": [len(s.images) for s in self.turns], "node_ids": [list(s.node_ids) for s in self.turns],
                "actions": [r.action for r in self.result.turn_records],
                "replies": [r.reply for r in self.result.turn_records],
                "graph": self.result.graph.to_dict(),
                "reward": None if self.reward is None else self.reward.to_dict()}


def _sample(task: RolloutTask, index: int, recorded: RecordedTurn, result: VimRAGResult, nodes: tuple[str, ...],
            seed: int) -> TurnSample:
    n = len(recorded.response_ids)
    return TurnSample(group_id=task.group_id, index=index, prompt_ids=list(recorded.prompt_ids),
                      response_ids=list(recorded.response_ids), response_mask=[1] * n,
                      response_logprobs=list(recorded.response_logprobs), turn_spans=[(0, n)],
                      images=list(recorded.images), result=result, seed=seed, turn=recorded.index, node_ids=nodes,
                      extra={"finish_reason": recorded.finish_reason})


async def run_vim_episode(task: RolloutTask, index: int, processor: Any, generate: GenerateFn, search: SearchClient,
                          config: VimRAGConfig, prompts: VimPrompts, seed: int, pages: PageImageStore | None = None,
                          max_prompt_length: int | None = None) -> VimTrajectory:
    """One VimRAG episode, every model call recorded as its own sample; never raises for an episode's failure."""
    ep_seed = episode_seed(seed, task.group_id, index)
    recorder = TurnRecordingPolicy(processor, prompt_budgeted(generate, max_prompt_length))
    episode = VimEpisode(task.question, replace(config, seed=ep_seed), prompts, recorder, search,
                         episode_id=f"{task.group_id}-{index}", pages=pages)
    async for _event in episode.run():
        pass
    result = episode.result()
    nodes = turn_nodes(memory_credit_graph(result.graph), len(recorder.turns))
    turns = [_sample(task, index, recorded, result, nodes[recorded.index], ep_seed) for recorded in recorder.turns]
    return VimTrajectory(group_id=task.group_id, index=index, turns=turns, result=result, seed=ep_seed,
                         extra={"reference": task.reference, "question": task.question})


async def rollout_vim_batch(tasks: list[RolloutTask], n: int, processor: Any, generate: GenerateFn,
                            search: SearchClient, config: VimRAGConfig, prompts: VimPrompts, seed: int = 0,
                            pages: PageImageStore | None = None,
                            max_prompt_length: int | None = None) -> list[VimTrajectory]:
    """n VimRAG rollouts of every task, all concurrently; trajectories come back grouped, in task order."""
    if n < 1:
        raise ValueError("n must be at least 1")
    pages = pages or PageImageStore()
    runs = [run_vim_episode(task, i, processor, generate, search, config, prompts, seed, pages, max_prompt_length)
            for task in tasks for i in range(n)]
    return list(await asyncio.gather(*runs))
