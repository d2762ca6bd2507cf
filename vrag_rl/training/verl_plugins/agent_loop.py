"""`vrag_agent`: verl's agent loop running the project's own `Episode` (no second implementation).

verl instantiates this class per trajectory (`rollout.agent.default_agent_loop=vrag_agent`, or the
row's `agent_name` column) and awaits `run(sampling_params, **row)`. It is an adapter only:
- the episode is `vrag_rl.training.rollout.runner.run_one` — the same `Episode` + `TokenRecordingPolicy` as
  the demo, the evaluation and the local trainer — with verl's `server_manager.generate` as the
  generate function (`ServerManagerGenerate`) and the project's search server as the tool;
- the reward is `vrag_rl.training.rewards.score_episode` (unless `vrag.score_in_loop=false`, then verl's
  reward workers call `vrag_rl/training/verl_plugins/reward.py` with the same function);
- GGPO: `Trajectory.pruned_turns` (the local trainer's call too, with the same `AlgorithmSettings`)
  decides the pruned turns; their tokens get mask 0 here, because verl's advantage estimators never
  see the step graph (the `ggpo` estimator then reads the mask);
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

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, register

from search_engine.client import SearchClient
from vrag_rl.agent.page_images import PageImageStore
from vrag_rl.agent.policies.local_transformers import image_token_id
from vrag_rl.agent.policies.token_recorder import template_form, vision_token_ids
from vrag_rl.training.rewards import score_episode
from vrag_rl.training.rollout import RolloutTask, Trajectory
from vrag_rl.training.rollout.runner import run_one
from vrag_rl.training.verl_plugins.generate import ServerManagerGenerate
from vrag_rl.training.verl_plugins.reward import RECORD_KEY, episode_record, reference_from_extra_info
from vrag_rl.training.verl_plugins.settings import PluginSettings, plugin_settings
from vrag_rl.vrag.prompts import Prompts

_PAGES = PageImageStore()  # page images shared by the episodes of this worker process (bounded LRU)
REWARD_PARTS = ("total", "outcome", "format", "retrieval")


def vl_processor(loop: AgentLoopBase) -> Any:
    """The loop's processor as what it is at run time, the model's own (a tokenizer, a chat template):
    verl annotates `AgentLoopBase.processor` as `AutoProcessor`, a factory class that has neither."""
    return loop.processor


def filler_token_id(tokenizer: Any) -> int:
    """The token an output with no model token carries (mask 0): the pad token, else the end-of-text token."""
    for token_id in (getattr(tokenizer, "pad_token_id", None), getattr(tokenizer, "eos_token_id", None)):
        if isinstance(token_id, int):
            return token_id
    raise ValueError("the tokenizer has neither a pad nor an eos token to fill an empty response with")


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


def task_from_row(kwargs: dict[str, Any]) -> RolloutTask:
    """A dataset row (as verl passes it to `run`) as a rollout task: the question, the reward's reference and
    the group (verl's uid); a row without a question is refused with how to build one."""
    extra_info = dict(kwargs.get("extra_info") or {})
    question = extra_info.get("question")
    if not isinstance(question, str) or not question.strip():
        raise ValueError("the row's extra_info has no question; build the parquet with "
                         "`python -m vrag_rl.training.data`")
    reference = reference_from_extra_info(extra_info, (kwargs.get("reward_model") or {}).get("ground_truth"))
    group = str(kwargs.get("uid", extra_info.get("uid", extra_info.get("index", ""))))
    return RolloutTask(group, question, reference)


def server_generate(loop: Any, sampling_params: dict[str, Any]) -> ServerManagerGenerate:
    """The agent loop's generate through verl's server manager, vision special tokens suppressed unless the
    settings say otherwise (both agent loops call the model this way)."""
    suppress = loop.vision_ids if loop.settings.suppress_vision_tokens else {}
    return ServerManagerGenerate(loop.server_manager, sampling_params, loop.response_length,
                                 suppress_token_ids=suppress, rollout_name=loop.rollout_name)


def search_client(settings: PluginSettings) -> SearchClient:
    """A search client from the plugin's settings (one per episode: it lives on the episode's event loop)."""
    search = settings.search
    return SearchClient(search.url, api_key=search.api_key, timeout=search.timeout_s, max_retries=search.retries)


@register("vrag_agent")
class VRAGAgentLoop(AgentLoopBase):
    """Runs one VRAG episode per trajectory (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        if self.processor is None:
            raise ValueError("vrag_agent needs a vision-language model with a processor (the pages are images)")
        self.settings: PluginSettings = plugin_settings(self.config)
        self.response_length = int(self.rollout_config.response_length)
        self.image_token = image_token_id(self.processor)
        self.vision_ids = vision_token_ids(vl_processor(self).tokenizer)
        self.rollout_name = getattr(self.rollout_config, "name", None)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        task = task_from_row(kwargs)
        question, reference = task.question, task.reference
        settings = self.settings
        generate = server_generate(self, sampling_params)
        search = search_client(settings)
        try:
            trajectory = await run_one(task, int(kwargs.get("session_id") or 0), self.processor, generate, search,
                                       settings.agent, Prompts(), seed=0, pages=_PAGES)
        finally:
            await search.aclose()
        result = trajectory.result

        reward = await score_episode(result, reference, settings.reward_config()) if settings.score_in_loop else None
        pruned = trajectory.pruned_turns(settings.algorithm_settings, None if reward is None else reward.outcome,
                                         reference.reference_pages)
        mask = trajectory.loss_mask(pruned)
        response_ids, mask, logprobs, images = fit_response(trajectory, mask, self.image_token)
        prompt_ids = list(trajectory.prompt_ids) or self._initial_prompt_ids(question)
        empty = not response_ids
        if empty:  # no model token: one masked filler token, so verl's conversion has a response to hold the reward
            # (images stay those of the prompt, which fit_response counted)
            response_ids, mask, logprobs = [filler_token_id(vl_processor(self).tokenizer)], [0], [0.0]

        extra_fields: dict[str, Any] = {
            **generate.fields.for_output(kwargs.get("global_steps")),
            "pages_per_turn": trajectory.pages_per_turn,
            "shown_pages": list(result.retrieved_page_ids),
            "turn_actions": [record.action for record in result.turn_records],
            "step_graph": result.step_graph.to_dict(),
            "episode_status": result.status,
            "episode_error": result.error or "",
            "ggpo_pruned_turns": pruned,
            RECORD_KEY: episode_record(result, settings.reward, vars(settings.judge)),
            "turn_scores": [],
            "tool_rewards": [],
        }
        reward_score = None
        if reward is not None:
            parts = {"total": reward.total, "outcome": reward.outcome, "format": reward.format,
                     "retrieval": reward.retrieval}
            if empty:  # nothing of the model's to credit or blame: zero reward (the group still has its member)
                parts = dict.fromkeys(REWARD_PARTS, 0.0)
            reward_score = float(parts["total"])
            extra_fields["reward_parts"] = parts
            extra_fields["reward_extra_info"] = {  # the same keys for every output (verl stacks them per key)
                **{f"vrag/{k}": float(parts[k]) for k in REWARD_PARTS},
                "vrag/turns": float(len(trajectory.turn_spans)), "vrag/ggpo_pruned_turns": float(len(pruned)),
                "vrag/answered": float(result.answered), "vrag/empty_response": float(empty),
            }
        timings = result.timings
        return AgentLoopOutput(
            prompt_ids=prompt_ids,
            response_ids=response_ids,
            response_mask=mask,
            response_logprobs=logprobs,
            multi_modal_data={"images": images} if images else {},
            reward_score=reward_score,
            num_turns=2 * len(trajectory.turn_spans),  # the question, each model turn, each observation between
            metrics=AgentLoopMetrics(generate_sequences=generate.generate_s,
                                     tool_calls=timings.get("search_s", 0.0) + timings.get("image_s", 0.0),
                                     num_preempted=generate.fields.num_preempted),
            extra_fields=extra_fields,
        )

    def _initial_prompt_ids(self, question: str) -> list[int]:
        """The system + question prompt as the token recorder renders it (for an episode that never rendered it)."""
        text = vl_processor(self).apply_chat_template(template_form(Prompts().initial_messages(question)),
                                                      add_generation_prompt=True, tokenize=False)
        return list(vl_processor(self).tokenizer(text, add_special_tokens=False)["input_ids"])
