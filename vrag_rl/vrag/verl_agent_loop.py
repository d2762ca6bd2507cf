"""`vrag_agent`: verl's agent loop running the project's own `Episode` (no second implementation).

verl instantiates this class per trajectory (`rollout.agent.default_agent_loop=vrag_agent`, or the
row's `agent_name` column) and awaits `run(sampling_params, **row)`. It is an adapter only:
- the episode is `vrag_rl.vrag.rollout.run_one` — the same `Episode` + `TokenRecordingPolicy` as
  the demo, the evaluation and the local trainer — with verl's `server_manager.generate` as the
  generate function (`ServerManagerGenerate`) and the project's search server as the tool;
- what every agent's loop shares (the row, the server, the search client, the output fields) is
  `vrag_rl.training.verl_plugins.episode_loop`;
- the reward is `vrag_rl.training.rewards.score_episode` (unless `vrag.score_in_loop=false`, then verl's
  reward workers call `vrag_rl/training/verl_plugins/reward.py` with the same function);
- GGPO: `Trajectory.pruned_turns` (the local trainer's call too, with the same `AlgorithmSettings`)
  decides the pruned turns; their tokens get mask 0 here, because verl's advantage estimators never
  see the credit graph (the `ggpo` estimator then reads the mask);
- what verl's trainer reads of the generations (`global_steps`, `min_global_steps`,
  `max_global_steps`, speculative-decoding counts; `num_preempted` in the metrics) is passed on from
  the server's outputs (`generate.ServerFields`): the v1 trainer (verl's default) tags every
  trajectory with the weight versions and crashed on `int(None)` at the end of step 1 without them;
- an episode with no model token (its first generate failed, or its first reply was rejected for a
  vision special token) still returns a valid output: one filler token with mask 0, reward 0, the
  same extra-field keys as every other output — verl's conversion needs at least one response token
  (`rm_scores[-1]`) and, under v1, a raising session drops the question's whole group.

What it returns is verl's `AgentLoopOutput`: prompt ids, the response (model turns with mask 1,
observations — text and image tokens — with mask 0), the sampled logprobs, the images the model
saw (`multi_modal_data["images"]`, in order, exactly as many as the ids have image placeholders),
`reward_score`, and `extra_fields` with the server's fields above, the pages retrieved per turn, the
turn graph, the reward parts (also as `reward_extra_info`, which verl logs) and the episode record for
reward.py.
"""
from __future__ import annotations

from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopOutput, register

from vrag_rl.agent.policies.local_transformers import image_token_id
from vrag_rl.training.rewards import score_episode
from vrag_rl.training.rollout import Trajectory
from vrag_rl.training.verl_plugins.episode_loop import (
    PAGES,
    EpisodeAgentLoop,
    reward_fields,
    reward_parts,
    task_from_row,
)
from vrag_rl.training.verl_plugins.reward import RECORD_KEY, episode_record
from vrag_rl.vrag.rollout import run_one


def fit_response(trajectory: Trajectory, mask: list[int], image_token: int) -> tuple[list[int], list[int],
                                                                                     list[float], list[Any]]:
    """The response up to the end of the last model turn, and the images whose tokens it holds.

    An episode that stopped for lack of room (or any failure) may have recorded one more
    observation after its last model turn; it carries no model tokens, so it is dropped, and with
    it its images — verl re-processes exactly the images of `multi_modal_data` against the ids.
    """
    end = trajectory.turn_spans[-1][1] if trajectory.turn_spans else 0
    ids = trajectory.response_ids[:end]
    runs, previous = 0, None
    for token in trajectory.prompt_ids + ids:
        if token == image_token and previous != image_token:
            runs += 1
        previous = token
    return ids, mask[:end], trajectory.response_logprobs[:end], trajectory.images[:runs]


@register("vrag_agent")
class VRAGAgentLoop(EpisodeAgentLoop):
    """Runs one VRAG episode per trajectory (see the module docstring)."""

    agent_loop_name = "vrag_agent"

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.image_token = image_token_id(self.processor)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        task = task_from_row(kwargs)
        question, reference = task.question, task.reference
        settings = self.settings
        generate = self.server_generate(sampling_params)
        search = self.search_client()
        try:
            trajectory = await run_one(task, int(kwargs.get("session_id") or 0), self.processor, generate, search,
                                       settings.agent, settings.prompts, seed=0, pages=PAGES)
        finally:
            await search.aclose()
        result = trajectory.result

        reward = await score_episode(result, reference, settings.reward_config()) if settings.score_in_loop else None
        pruned = trajectory.pruned_turns(settings.algorithm_settings, None if reward is None else reward.outcome,
                                         reference.reference_pages)
        mask = trajectory.loss_mask(pruned)
        response_ids, mask, logprobs, images = fit_response(trajectory, mask, self.image_token)
        prompt_ids = list(trajectory.prompt_ids) or self.prompt_ids(settings.prompts.initial_messages(question))
        empty = not response_ids
        if empty:  # no model token: one masked filler token, so verl's conversion has a response to hold the reward
            # (images stay those of the prompt, which fit_response counted)
            response_ids, mask, logprobs = [self.filler_token_id()], [0], [0.0]

        extra_fields: dict[str, Any] = {
            **self.episode_fields(generate, kwargs.get("global_steps"), result, pruned, trajectory.pages_per_turn),
            "shown_pages": list(result.retrieved_page_ids),
            "credit_graph": result.credit_graph.to_dict(),
            RECORD_KEY: episode_record(result, settings.reward, vars(settings.judge)),
        }
        reward_score = None
        if reward is not None:
            parts = reward_parts(reward, empty)
            reward_score = float(parts["total"])
            extra_fields.update(reward_fields(parts, "vrag", len(trajectory.turn_spans), pruned, result.answered,
                                              empty))
        return AgentLoopOutput(
            prompt_ids=prompt_ids,
            response_ids=response_ids,
            response_mask=mask,
            response_logprobs=logprobs,
            multi_modal_data={"images": images} if images else {},
            reward_score=reward_score,
            num_turns=2 * len(trajectory.turn_spans),  # the question, each model turn, each observation between
            metrics=self.loop_metrics(generate, result),
            extra_fields=extra_fields,
        )
