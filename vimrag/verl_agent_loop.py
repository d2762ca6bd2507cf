"""`vimrag_agent`: verl's agent loop running the VimRAG memory-graph agent, one training row per model call.

VimRAG rebuilds its context from its memory graph at every model call, so a trajectory is a list of turns
with their own prompts, not one growing conversation. verl 0.9.1 has a supported way for one `run()` to
return several samples: its v1 trainer's agent-loop worker (`verl.trainer.ppo.v1.agent_loop_tq.
AgentLoopWorkerTQ._agent_loop_postprocess`) accepts a `list[AgentLoopOutput]` and stores each output as its
own row under the key `{uid}_{session_id}_{index}`; its `compute_advantage_for_multi_trajectories` then
runs GRPO on each session's *final* output only and broadcasts that advantage over the session's other
outputs' `response_mask`. That is GRPO normalised over trajectories, not over turn rows — the rule this
project chose (`vrag_rl.training.algos.grpo.trajectory_advantages`). So `run()` returns the trajectory's turns,
and this loop needs the v1 trainer (`trainer.use_v1: true`, verl's default): the v0 worker unions generated rows
1:1 with the prompt rows and cannot take a list (checked at construction, with a message).

Each row: the turn's own prompt ids (system + question + graph JSON + the memory images the energy budget
kept, plus this turn's tool response), its sampled ids (mask 1) and logprobs, exactly the images of its
prompt (`multi_modal_data`), the trajectory's reward (every row of a session carries it, as verl's v1 worker
copies the final one anyway), and in `extra_fields` the turn index, the memory-graph node(s) it built and
whether GGPO dropped it.

GGPO on the memory graph: μ_t (`VimTrajectory.pruned_turns`, the local trainer's call too) zeroes a dropped
turn's `response_mask`. Because verl reads the session's advantage at the *final* row's first unmasked
token, the rows are ordered dropped turns first, kept turns after (each row is an independent sample, so the
order changes nothing else): the final row is a kept turn whenever any is, and when every turn is dropped the
whole session has no gradient anyway while its outcome still counts in its group's statistics. The
estimator is verl's own `grpo` (`algorithm.adv_estimator: grpo`, the path that normalises over trajectories);
the loss is GSPO's sequence ratio per row (`parts/ggpo_vimrag.yaml`).

Budgets: a turn's prompt never exceeds `data.max_prompt_length` (verl pads every row's prompt to it): the
memory buffer (`energy.total_pixels`) is sized so text (`vimrag.text_tokens`), one turn's observations and
the memory fit (`energy_for_prompt_length`), and a prompt that still would not fit ends the episode as an
explicit failure before it is sent (`PromptBudgetError`), never truncated. Each turn's response has the whole
`rollout.response_length` (it is its own row).

Mini-batches by trajectory (`check_trajectory_mini_batches`): verl's v1 trainer counts a mini-batch in rows, and
here a row is a turn, so with the VRAG configs' mini-batch the optimiser updates per step would grow with the
episodes' length and a trajectory's turns would land in different mini-batches. `parts/vimrag.yaml` makes one
mini-batch hold every row of a step (one update per step, every trajectory whole in it).
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopOutput, register

from vimrag.config import VimRAGConfig
from vimrag.context import build_context
from vimrag.graph import MemoryGraph
from vimrag.prompts import VimPrompts
from vimrag.rollout import VimTrajectory, energy_for_prompt_length, run_vim_episode
from vrag_rl.agent.policies.token_recorder import GenerateOutput
from vrag_rl.agent.policy import SamplingParams
from vrag_rl.training.rewards import score_episode
from vrag_rl.training.verl_plugins.episode_loop import (
    PAGES,
    EpisodeAgentLoop,
    reward_fields,
    reward_parts,
    task_from_row,
)
from vrag_rl.training.verl_plugins.generate import ServerManagerGenerate
from vrag_rl.training.verl_plugins.settings import PluginSettingsError, plain_sections

_VIMRAG_KEYS = {"agent", "prompts", "text_tokens"}


@dataclass(frozen=True)
class VimRAGPluginSettings:
    """The config's `vimrag:` section: the agent (`VimRAGConfig` fields), its prompts, and the text a turn's
    prompt may hold (sizes the memory buffer against `data.max_prompt_length`)."""

    agent: VimRAGConfig
    prompts: VimPrompts
    text_tokens: int


# what `vimrag_plugin_settings` reads of the trainer config (and `check_trajectory_mini_batches` of the actor)
SETTINGS_PATHS = ("vimrag", "data", "algorithm.adv_estimator", "trainer.use_v1", "trainer.n_gpus_per_node",
                  "trainer.nnodes", "vrag.reward", "actor_rollout_ref.rollout.n",
                  *(f"actor_rollout_ref.actor.{key}" for key in ("ppo_mini_batch_size", "use_dynamic_bsz",
                                                                 "ppo_max_token_len_per_gpu",
                                                                 "ulysses_sequence_parallel_size")))


def vimrag_plugin_settings(config: Any) -> VimRAGPluginSettings:
    """Read and validate `config.vimrag` against verl's prompt and response lengths."""
    root = plain_sections(config, SETTINGS_PATHS)
    section = root.get("vimrag") if isinstance(root, dict) else None
    if not isinstance(section, dict):
        raise PluginSettingsError("vimrag_agent needs a `vimrag:` section; start from configs/verl/*vimrag*.yaml")
    extra = sorted(set(section) - _VIMRAG_KEYS)
    if extra:
        raise PluginSettingsError(f"vimrag: unknown key(s) {extra}; allowed: {sorted(_VIMRAG_KEYS)}")
    agent_fields = {f.name for f in fields(VimRAGConfig)}
    agent = dict(section.get("agent") or {})
    prompt_fields = {f.name for f in fields(VimPrompts)}
    prompts = dict(section.get("prompts") or {})
    for name, given, known in (("agent", agent, agent_fields), ("prompts", prompts, prompt_fields)):
        unknown = sorted(set(given) - known)
        if unknown:
            raise PluginSettingsError(f"vimrag.{name}: unknown key(s) {unknown}")
    data = root.get("data") or {}
    try:
        vim = VimRAGConfig(**agent)
        text_tokens = int(section.get("text_tokens", 0))
        prompt_length = data.get("max_prompt_length")
        if prompt_length is not None and text_tokens > 0:
            vim = energy_for_prompt_length(vim, int(prompt_length), text_tokens)
    except (TypeError, ValueError) as exc:
        raise PluginSettingsError(f"vimrag: {exc}") from exc
    adv = (root.get("algorithm") or {}).get("adv_estimator")
    if adv is not None and adv != "grpo":
        raise PluginSettingsError(f"algorithm.adv_estimator={adv!r}: vimrag_agent needs verl's 'grpo', the estimator "
                                  "verl's v1 trainer normalises over trajectories (GGPO's mask is in response_mask)")
    if not bool((root.get("trainer") or {}).get("use_v1", True)):
        raise PluginSettingsError("vimrag_agent returns one row per model call; only verl's v1 trainer "
                                  "(trainer.use_v1=true) accepts several outputs per run()")
    retrieval = ((root.get("vrag") or {}).get("reward") or {}).get("retrieval_source", "shown")
    if retrieval != "ranked":
        raise PluginSettingsError("vrag.reward.retrieval_source must be 'ranked' for vimrag_agent: a VimRAG result "
                                  "lists every page its searches returned, in rank order")
    response = data.get("max_response_length")
    if response is not None and vim.max_tokens > response:
        raise PluginSettingsError(f"vimrag.agent.max_tokens ({vim.max_tokens}) exceeds data.max_response_length "
                                  f"({response}), which holds one turn's reply")
    check_trajectory_mini_batches(root, vim.max_turns)
    return VimRAGPluginSettings(agent=vim, prompts=VimPrompts(**prompts), text_tokens=text_tokens)


def check_trajectory_mini_batches(root: dict[str, Any], max_turns: int) -> None:
    """Refuse a config whose actor mini-batch could cut a step's trajectories (rows: one per turn) apart.

    What this relies on in verl 0.9.1 (line numbers of the installed wheel):
    - `verl/trainer/ppo/v1/trainer_base.py` 1827-1852, `_update_actor`: the actor's mini-batch is
      `actor.ppo_mini_batch_size * rollout.n` *rows* (`global_batch_size` and `mini_batch_size` of the update).
    - same file 1589-1606 `_get_required_batch_multiple` and 1608-1627 `_balance_batch`: a step's rows are padded
      (`verl/trainer/ppo/padding_utils.py` 144, `upsample_batch_to_divisible_size`: 128-token rows whose
      `response_mask` is 0, line 101) to a multiple of lcm(dp size, that mini-batch), then reordered across the
      dp ranks by sequence length, so the rows of one trajectory are not contiguous.
    - `verl/workers/engine_workers.py` 243-287, `train_mini_batch`: each rank cuts its rows into
      `mini_batch_size // dp` slices (270) with `verl/utils/tensordict_utils.py` 559-604 `make_iterator`, which
      asserts the rows divide evenly (588); one optimiser step per slice.
    So the only split that keeps every trajectory whole is one mini-batch holding all the step's rows: at most
    `data.train_batch_size * rollout.n * (max_turns + 1)` (one row per model call, plus the forced-answer call;
    an episode with no turn returns one filler row), i.e. `ppo_mini_batch_size >= train_batch_size * (max_turns
    + 1)`. verl pads a step's rows up to exactly that, so a step is always one update, whatever the episodes'
    lengths. Two more verl rules follow: `verl/workers/config/actor.py` 222-229 (`ActorConfig.validate`) refuses
    `ppo_mini_batch_size > data.train_batch_size` unless `use_dynamic_bsz` (micro-batches by tokens), and then
    `verl/utils/seqlen_balancing.py` ~384 needs `ppo_max_token_len_per_gpu` >= the longest row. Cost: the padding
    rows (128 tokens each) go through the log-prob, reference and update passes; and `seq-mean-token-mean` divides
    by the mini-batch's row count (`global_batch_size`, padding rows included), so the gradient is scaled by
    (real rows / mini-batch rows), which varies from step to step (Adam is invariant to a constant scale only;
    `grad_clip` sees the scaled norm).
    """
    actor = (root.get("actor_rollout_ref") or {}).get("actor") or {}
    rollout = (root.get("actor_rollout_ref") or {}).get("rollout") or {}
    data = root.get("data") or {}
    trainer = root.get("trainer") or {}
    prompts, mini = data.get("train_batch_size"), actor.get("ppo_mini_batch_size")
    if prompts is None or mini is None:
        return
    needed = int(prompts) * (max_turns + 1)
    if int(mini) < needed:
        raise PluginSettingsError(
            f"actor_rollout_ref.actor.ppo_mini_batch_size={mini} lets verl cut a step's trajectories apart: it counts "
            "mini-batches in rows and vimrag_agent returns one row per turn. One mini-batch must hold every row of a "
            f"step: set actor_rollout_ref.actor.ppo_mini_batch_size={needed} ({prompts} prompts x ({max_turns} + 1) "
            "turns: data.train_batch_size x (vimrag.agent.max_turns + the forced-answer turn))")
    if not actor.get("use_dynamic_bsz", False):
        raise PluginSettingsError(
            "vimrag_agent needs actor_rollout_ref.actor.use_dynamic_bsz=true: its mini-batch holds a whole step "
            f"({mini} > data.train_batch_size={prompts}), which verl refuses with row-counted micro-batches")
    longest = int(data.get("max_prompt_length") or 0) + int(data.get("max_response_length") or 0)
    max_tokens = actor.get("ppo_max_token_len_per_gpu")
    if max_tokens is not None and int(max_tokens) < longest:
        raise PluginSettingsError(
            f"actor_rollout_ref.actor.ppo_max_token_len_per_gpu={max_tokens} is below one turn's row (data."
            f"max_prompt_length + data.max_response_length = {longest}); verl's token micro-batches need it "
            f">= {longest}")
    gpus = int(trainer.get("n_gpus_per_node") or 1) * int(trainer.get("nnodes") or 1)
    dp = max(1, gpus // int(actor.get("ulysses_sequence_parallel_size") or 1))
    rows = int(mini) * int(rollout.get("n") or 1)
    if rows % dp:
        raise PluginSettingsError(
            f"the actor's mini-batch ({mini} x rollout.n = {rows} rows) does not divide by the data-parallel size "
            f"{dp} (verl's train_mini_batch splits it evenly across ranks): raise ppo_mini_batch_size to a value "
            f">= {needed} whose rows do")


class TurnBudgetGenerate:
    """`ServerManagerGenerate` with the whole response length for every turn (each turn is its own row)."""

    def __init__(self, inner: ServerManagerGenerate):
        self.inner = inner

    async def __call__(self, prompt_ids: list[int], sampling: SamplingParams, images: list[Any]) -> GenerateOutput:
        self.inner.prompt_length = len(prompt_ids)  # the response budget restarts at this turn's own prompt
        return await self.inner(prompt_ids, sampling, images)


def ordered_rows(trajectory: VimTrajectory, pruned: list[int]) -> list[tuple[int, bool]]:
    """(turn index, kept) in row order: dropped turns first, then kept ones (see the module docstring)."""
    dropped = set(pruned)
    turns = [s.turn for s in trajectory.turns]
    return [(s, False) for s in turns if s in dropped] + [(s, True) for s in turns if s not in dropped]


@register("vimrag_agent")
class VimRAGAgentLoop(EpisodeAgentLoop):
    """Runs one VimRAG episode per session and returns its turns as rows (see the module docstring)."""

    agent_loop_name = "vimrag_agent"

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.vimrag = vimrag_plugin_settings(self.config)
        self.prompt_length = int(self.rollout_config.prompt_length)

    # A list, not one output: verl's v1 worker stores each (one per memory node; see the module docstring).
    async def run(  # type: ignore[override]
            self, sampling_params: dict[str, Any], **kwargs: Any) -> list[AgentLoopOutput]:
        task = task_from_row(kwargs)
        question, reference = task.question, task.reference
        settings = self.settings
        inner = self.server_generate(sampling_params)
        search = self.search_client()
        try:
            trajectory = await run_vim_episode(task, int(kwargs.get("session_id") or 0), self.processor,
                                               TurnBudgetGenerate(inner), search, self.vimrag.agent,
                                               self.vimrag.prompts, seed=0, pages=PAGES,
                                               max_prompt_length=self.prompt_length)
        finally:
            await search.aclose()
        result = trajectory.result
        reward = await score_episode(result, reference, settings.reward_config())
        pruned = trajectory.pruned_turns(settings.algorithm_settings, reward.outcome, reference.reference_pages)
        empty = not trajectory.turns
        parts = reward_parts(reward, empty)  # no model token at all: zero reward, one masked filler row
        shared: dict[str, Any] = {
            **self.episode_fields(inner, kwargs.get("global_steps"), result, pruned,
                                  [r.retrieved for r in result.turn_records]),
            "memory_graph": result.graph.to_dict(),
            **reward_fields(parts, "vimrag", len(trajectory.turns), pruned, result.answered, empty),
        }
        metrics = self.loop_metrics(inner, result)
        if empty:
            return [AgentLoopOutput(prompt_ids=self._initial_prompt_ids(question),
                                    response_ids=[self.filler_token_id()], response_mask=[0],
                                    response_logprobs=[0.0], multi_modal_data={}, reward_score=0.0, num_turns=2,
                                    metrics=metrics, extra_fields={**shared, "turn": -1, "node_ids": [],
                                                                   "ggpo_dropped": True})]
        by_index = {s.turn: s for s in trajectory.turns}
        outputs = []
        for index, kept in ordered_rows(trajectory, pruned):
            turn = by_index[index]
            n = len(turn.response_ids)
            outputs.append(AgentLoopOutput(
                prompt_ids=list(turn.prompt_ids), response_ids=list(turn.response_ids),
                response_mask=[int(kept)] * n, response_logprobs=list(turn.response_logprobs),
                multi_modal_data={"images": list(turn.images)} if turn.images else {},
                reward_score=float(parts["total"]), num_turns=2, metrics=metrics,
                extra_fields={**shared, "turn": index, "node_ids": list(turn.node_ids), "ggpo_dropped": not kept}))
        return outputs

    def _initial_prompt_ids(self, question: str) -> list[int]:
        """The first turn's prompt (the empty graph) as the recorder renders it, for an episode with no turn."""
        messages, _ = build_context(MemoryGraph(question.strip()), {}, PAGES, self.vimrag.agent.energy,
                                    self.vimrag.prompts, self.vimrag.agent.resize_factor)
        return self.prompt_ids(messages)
