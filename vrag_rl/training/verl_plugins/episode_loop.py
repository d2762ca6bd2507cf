"""What every agent's verl agent loop shares: reading verl's row, calling verl's server, building the outputs.

An agent's loop (`AgentPlugin.verl_loop`: `vrag_rl.vrag.verl_agent_loop`, `vimrag.verl_agent_loop`) runs its
own episode and decides which tokens a row holds; everything around that is the same for every agent and
lives here once:
- the row → `RolloutTask` (question, reward reference, group);
- verl's server manager as the episode's generate function, vision special tokens suppressed;
- one search client per episode from the `vrag:` settings;
- the reward parts and `extra_fields` every output carries (the same keys for every output of a run, since
  verl stacks them per key), the loop metrics, and the filler token of an output with no model token.
"""
from __future__ import annotations

from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics

from search_engine.client import SearchClient
from vrag_rl.agent.page_images import PageImageStore
from vrag_rl.agent.policies.token_recorder import template_form, vision_token_ids
from vrag_rl.agent.result import EpisodeResultBase
from vrag_rl.training.rewards import RewardBreakdown
from vrag_rl.training.rollout import RolloutTask
from vrag_rl.training.verl_plugins.generate import ServerManagerGenerate
from vrag_rl.training.verl_plugins.reward import reference_from_extra_info
from vrag_rl.training.verl_plugins.settings import PluginSettings, plugin_settings

REWARD_PARTS = ("total", "outcome", "format", "retrieval")
PAGES = PageImageStore()  # page images shared by the episodes of this worker process (bounded LRU)


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


def reward_parts(reward: RewardBreakdown, empty: bool) -> dict[str, float]:
    """The reward's parts as an output carries them; all zero for an episode with no model token (nothing of
    the model's to credit or blame; the group still has its member)."""
    if empty:
        return dict.fromkeys(REWARD_PARTS, 0.0)
    return {"total": reward.total, "outcome": reward.outcome, "format": reward.format, "retrieval": reward.retrieval}


def reward_fields(parts: dict[str, float], namespace: str, turns: int, pruned: list[int], answered: bool,
                  empty: bool) -> dict[str, Any]:
    """`reward_parts` and `reward_extra_info` (which verl logs, under `<namespace>/...`): the same keys for every
    output of every agent."""
    return {"reward_parts": parts,
            "reward_extra_info": {**{f"{namespace}/{k}": float(parts[k]) for k in REWARD_PARTS},
                                  f"{namespace}/turns": float(turns),
                                  f"{namespace}/ggpo_pruned_turns": float(len(pruned)),
                                  f"{namespace}/answered": float(answered),
                                  f"{namespace}/empty_response": float(empty)}}


class EpisodeAgentLoop(AgentLoopBase):
    """verl's `AgentLoopBase` with what every agent's loop sets up: the `vrag:` settings, the lengths, the
    vision token ids; and the helpers its `run` builds outputs with."""

    agent_loop_name = "agent loop"  # the name the subclass registers under, for messages

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        if self.processor is None:
            raise ValueError(f"{self.agent_loop_name} needs a vision-language model with a processor (pages are "
                             "images)")
        self.settings: PluginSettings = plugin_settings(self.config)
        self.response_length = int(self.rollout_config.response_length)
        self.vision_ids = vision_token_ids(vl_processor(self).tokenizer)
        self.rollout_name = getattr(self.rollout_config, "name", None)

    def server_generate(self, sampling_params: dict[str, Any]) -> ServerManagerGenerate:
        """verl's server manager as the episode's generate function, vision special tokens suppressed unless the
        settings say otherwise."""
        suppress = self.vision_ids if self.settings.suppress_vision_tokens else {}
        return ServerManagerGenerate(self.server_manager, sampling_params, self.response_length,
                                     suppress_token_ids=suppress, rollout_name=self.rollout_name)

    def search_client(self) -> SearchClient:
        """A search client from the settings (one per episode: it lives on the episode's event loop)."""
        search = self.settings.search
        return SearchClient(search.url, api_key=search.api_key, timeout=search.timeout_s, max_retries=search.retries)

    def episode_fields(self, generate: ServerManagerGenerate, global_steps: Any, result: EpisodeResultBase,
                       pruned: list[int], pages_per_turn: list[list[list[str]]]) -> dict[str, Any]:
        """The `extra_fields` every output of an episode carries: what verl's trainer reads of the generations,
        the episode's status, its pages and actions per turn, the turns GGPO pruned."""
        return {**generate.fields.for_output(global_steps),
                "episode_status": result.status, "episode_error": result.error or "",
                "pages_per_turn": pages_per_turn, "turn_actions": [r.action for r in result.turn_records],
                "ggpo_pruned_turns": pruned, "turn_scores": [], "tool_rewards": []}

    def loop_metrics(self, generate: ServerManagerGenerate, result: EpisodeResultBase) -> AgentLoopMetrics:
        """Time in the model and in the tools (search and image work), and the server's preemptions."""
        timings = result.timings
        return AgentLoopMetrics(generate_sequences=generate.generate_s,
                                tool_calls=timings.get("search_s", 0.0) + timings.get("image_s", 0.0),
                                num_preempted=generate.fields.num_preempted)

    def filler_token_id(self) -> int:
        """The one masked token of an output with no model token."""
        return filler_token_id(vl_processor(self).tokenizer)

    def prompt_ids(self, messages: list[dict[str, Any]]) -> list[int]:
        """`messages` rendered as the token recorder renders a prompt (for an episode that never rendered one)."""
        text = vl_processor(self).apply_chat_template(template_form(messages), add_generation_prompt=True,
                                                      tokenize=False)
        return list(vl_processor(self).tokenizer(text, add_special_tokens=False)["input_ids"])
