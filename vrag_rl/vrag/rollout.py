"""The VRAG agent as a rollout environment: n episodes per question, concurrently, each recorded as one
token trajectory (`AgentPlugin.rollout` of the `vrag` plugin).

Every episode gets its own `TokenRecordingPolicy` (it holds that episode's token record) over one
shared `GenerateFn` (the in-process model here, verl's server manager in the verl plugin), and its
own sampling seed derived from (run seed, question id, rollout index): a rollout is reproducible
whatever order the concurrent episodes happen to reach the model in.
"""
from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

from search_engine.client import SearchClient
from vrag_rl.agent.page_images import PageImageStore
from vrag_rl.agent.policies.token_recorder import GenerateFn, TokenRecordingPolicy
from vrag_rl.training.rollout.task import RolloutTask, episode_seed
from vrag_rl.training.rollout.trajectory import Trajectory
from vrag_rl.vrag.config import AgentConfig
from vrag_rl.vrag.credit_graph import vrag_credit_graph
from vrag_rl.vrag.loop import Episode
from vrag_rl.vrag.prompts import Prompts


async def run_one(task: RolloutTask, index: int, processor: Any, generate: GenerateFn, search: SearchClient,
                  config: AgentConfig, prompts: Prompts, seed: int, pages: PageImageStore | None = None) -> Trajectory:
    """One episode with a fresh token recorder; the episode never raises (failures are statuses)."""
    ep_seed = episode_seed(seed, task.group_id, index)
    recorder = TokenRecordingPolicy(processor, generate)
    episode = Episode(task.question, replace(config, seed=ep_seed), prompts, recorder, search,
                      episode_id=f"{task.group_id}-{index}", pages=pages)
    async for _event in episode.run():
        pass
    result = episode.result()
    # the graph GGPO prunes on: answer edges to every step the model could have read (vrag_credit_graph)
    result = replace(result, credit_graph=vrag_credit_graph(result.turn_records,
                                                        {ref.image_id: ref.page_id for ref in result.images}))
    return Trajectory(group_id=task.group_id, index=index, prompt_ids=list(recorder.prompt_ids),
                      response_ids=list(recorder.response_ids), response_mask=list(recorder.response_mask),
                      response_logprobs=list(recorder.response_logprobs), turn_spans=list(recorder.turn_spans),
                      images=list(recorder.images), result=result, seed=ep_seed,
                      extra={"reference": task.reference, "question": task.question,
                             "finish_reasons": list(recorder.finish_reasons)})


async def rollout_group(task: RolloutTask, n: int, processor: Any, generate: GenerateFn, search: SearchClient,
                        config: AgentConfig, prompts: Prompts, seed: int = 0,
                        pages: PageImageStore | None = None) -> list[Trajectory]:
    """n rollouts of one question, concurrently (a GRPO group)."""
    if n < 1:
        raise ValueError("n must be at least 1")
    pages = pages or PageImageStore()
    return list(await asyncio.gather(*(run_one(task, i, processor, generate, search, config, prompts, seed, pages)
                                       for i in range(n))))


async def rollout_batch(tasks: list[RolloutTask], n: int, processor: Any, generate: GenerateFn, search: SearchClient,
                        config: AgentConfig, prompts: Prompts, seed: int = 0,
                        pages: PageImageStore | None = None) -> list[Trajectory]:
    """n rollouts of every task, all concurrently; trajectories come back grouped, in task order."""
    pages = pages or PageImageStore()
    groups = await asyncio.gather(*(rollout_group(t, n, processor, generate, search, config, prompts, seed, pages)
                                    for t in tasks))
    return [trajectory for group in groups for trajectory in group]
