"""The `vrag:` section of a verl config, read into the project's own config types.

verl's config schema has no place for the agent's settings (its dataclasses reject unknown keys),
so our Hydra configs carry one top-level `vrag:` section. Every plugin reads it through this one
function, so a typo there fails loudly at start-up (and in the config test), not as a silently
ignored key: unknown keys raise, values go through `AgentConfig` / `RewardConfig` validation,
and the settings are checked against the verl keys they must agree with.

The algorithm keys (`vrag.algorithm`, `vrag.ggpo.correct_threshold`) are the local trainer's too, read
by the same `vrag_rl.training.algos.settings.algorithm_settings` into the same `AlgorithmSettings`.
"""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from vrag_rl.agent.plugins import agent_plugin, verl_loop_plugin
from vrag_rl.training.algos.settings import ALGORITHMS, AlgorithmSettings, AlgorithmSettingsError, algorithm_settings

__all__ = ["ALGORITHMS", "JudgeSettings", "PluginSettings", "PluginSettingsError", "SearchSettings", "plain_config",
           "plain_sections", "build_reward_config", "plugin_settings"]
_TOP_KEYS = {"algorithm", "score_in_loop", "search", "agent", "prompts", "reward", "judge", "ggpo",
             "suppress_vision_tokens"}
_SEARCH_KEYS = {"url", "api_key", "timeout_s", "retries"}
_JUDGE_KEYS = {"base_url", "model", "api_key_env", "max_retries", "timeout_s", "backoff_s", "max_tokens"}


class PluginSettingsError(ValueError):
    """The `vrag:` section is missing, has unknown keys, or disagrees with the verl keys it depends on."""


@dataclass(frozen=True)
class SearchSettings:
    url: str
    api_key: str | None = None
    timeout_s: float = 30.0
    retries: int = 3


@dataclass(frozen=True)
class JudgeSettings:
    """Where the judge lives; the API key is read from `api_key_env` in the worker, never from the config."""

    base_url: str | None = None
    model: str = "qwen-max-latest"
    api_key_env: str | None = "VRAG_JUDGE_API_KEY"
    max_retries: int = 3
    timeout_s: float = 60.0
    backoff_s: float = 1.0
    max_tokens: int | None = None


@dataclass(frozen=True)
class PluginSettings:
    algorithm_settings: AlgorithmSettings
    search: SearchSettings
    agent: Any  # the `vrag` agent plugin's config type (`AgentConfig`)
    prompts: Any = None  # the `vrag` agent plugin's prompts type (`Prompts`); None: its defaults
    reward: dict[str, Any] = field(default_factory=dict)  # RewardConfig fields (without the judge)
    judge: JudgeSettings = field(default_factory=JudgeSettings)
    score_in_loop: bool = True  # the agent loop sets reward_score; False: verl's reward workers call reward.py
    # bias vision special tokens out of sampling (vLLM / SGLang logit_bias); the token recorder rejects
    # a reply that holds one whatever the server did
    suppress_vision_tokens: bool = True

    @property
    def algorithm(self) -> str:
        """"grpo" or "ggpo" (`algorithm_settings.algorithm`)."""
        return self.algorithm_settings.algorithm

    def reward_config(self):
        """The `vrag_rl.training.rewards.RewardConfig` these settings describe (judge key from the environment)."""
        return build_reward_config(self.reward, self.judge)


def build_reward_config(reward: dict[str, Any], judge: JudgeSettings | dict[str, Any]):
    """`RewardConfig` from the `vrag.reward` / `vrag.judge` sections (also used by reward.py in verl's workers)."""
    from vrag_rl.training.rewards import JudgeConfig, RewardConfig

    judge = judge if isinstance(judge, JudgeSettings) else JudgeSettings(**judge)
    judge_config = None
    if judge.base_url:
        key = os.environ.get(judge.api_key_env) if judge.api_key_env else None
        judge_config = JudgeConfig(base_url=judge.base_url, model=judge.model, api_key=key,
                                   max_retries=judge.max_retries, backoff_s=judge.backoff_s,
                                   timeout_s=judge.timeout_s, max_tokens=judge.max_tokens)
    return RewardConfig(**reward, judge=judge_config)


def plain_config(node: Any) -> Any:
    """A verl config (OmegaConf) as plain dicts and lists, interpolations resolved; anything else as it is."""
    try:
        from omegaconf import DictConfig, ListConfig, OmegaConf

        if isinstance(node, (DictConfig, ListConfig)):
            return OmegaConf.to_container(node, resolve=True)
    except ImportError:  # pragma: no cover - omegaconf comes with hydra/verl
        pass
    return node


def plain_sections(config: Any, paths: Sequence[str]) -> dict[str, Any]:
    """Only the parts of a verl config at `paths` (dotted: "vrag", "actor_rollout_ref.rollout.n"), as plain
    nested dicts, interpolations resolved; a missing path is left out.

    Why not `plain_config` of the whole: verl builds an agent loop per trajectory, each reads its settings
    from the trainer config, and converting all of it (~1,100 lines) costs ~0.1 s of CPU against ~0.4 ms for
    the `vrag:` section alone."""
    root: dict[str, Any] = {}
    for path in paths:
        node: Any = config
        for key in path.split("."):
            node = node.get(key) if hasattr(node, "get") else None
            if node is None:
                break
        if node is None:
            continue
        *parents, last = path.split(".")
        target = root
        for key in parents:
            target = target.setdefault(key, {})
        target[last] = plain_config(node)
    return root


def _unknown(section: str, given: dict[str, Any], allowed: set[str]) -> None:
    extra = sorted(set(given) - allowed)
    if extra:
        raise PluginSettingsError(f"vrag.{section}: unknown key(s) {extra}; allowed: {sorted(allowed)}")


# what `plugin_settings` reads of the trainer config: its own section and the keys `_check_against_verl` compares
SETTINGS_PATHS = ("vrag", "algorithm.adv_estimator", "data.max_response_length", "data.max_prompt_length",
                  "actor_rollout_ref.rollout.agent.default_agent_loop", "actor_rollout_ref.rollout.max_model_len",
                  "actor_rollout_ref.actor.policy_loss.loss_mode", "actor_rollout_ref.actor.loss_agg_mode")


def plugin_settings(config: Any) -> PluginSettings:
    """Read and validate `config.vrag` (a verl trainer config, DictConfig or dict)."""
    root = plain_sections(config, SETTINGS_PATHS)
    vrag = root.get("vrag") if isinstance(root, dict) else None
    if not isinstance(vrag, dict):
        raise PluginSettingsError("the trainer config has no `vrag:` section; start from configs/verl/*.yaml")
    _unknown("", vrag, _TOP_KEYS)
    try:
        algorithm = algorithm_settings({k: vrag[k] for k in ("algorithm", "ggpo") if k in vrag}, where="vrag.")
    except AlgorithmSettingsError as exc:
        raise PluginSettingsError(str(exc)) from exc
    search = dict(vrag.get("search") or {})
    _unknown("search", search, _SEARCH_KEYS)
    if not search.get("url"):
        raise PluginSettingsError("vrag.search.url is not set (the search server the rollouts query)")
    agent_config = agent_plugin("vrag").config_type  # `vrag.agent` holds the VRAG agent's settings
    agent_fields = {f.name for f in dataclasses.fields(agent_config)}
    agent = dict(vrag.get("agent") or {})
    _unknown("agent", agent, agent_fields)
    prompts_type = agent_plugin("vrag").prompts_type  # `vrag.prompts`: the words of every turn (the parquet's too)
    prompts = dict(vrag.get("prompts") or {})
    _unknown("prompts", prompts, {f.name for f in dataclasses.fields(prompts_type)})
    judge = dict(vrag.get("judge") or {})
    _unknown("judge", judge, _JUDGE_KEYS)
    try:
        settings = PluginSettings(algorithm_settings=algorithm, search=SearchSettings(**search),
                                  agent=agent_config(**agent), prompts=prompts_type(**prompts),
                                  reward=dict(vrag.get("reward") or {}),
                                  judge=JudgeSettings(**judge), score_in_loop=bool(vrag.get("score_in_loop", True)),
                                  suppress_vision_tokens=bool(vrag.get("suppress_vision_tokens", True)))
        settings.reward_config()  # validates the reward keys and weights now, not in the first rollout
    except (TypeError, ValueError) as exc:
        raise PluginSettingsError(f"vrag: {exc}") from exc
    if settings.algorithm == "ggpo" and not settings.score_in_loop:
        raise PluginSettingsError("vrag.algorithm=ggpo needs vrag.score_in_loop=true: the prune mask depends on the "
                                  "reward, so the agent loop must score before it returns the mask")
    _check_against_verl(root, settings)
    return settings


def _check_against_verl(root: dict[str, Any], settings: PluginSettings) -> None:
    """The settings that must agree with verl's own keys (a mismatch would fail mid-run, on GPUs)."""
    adv = (root.get("algorithm") or {}).get("adv_estimator")
    # an agent whose loop returns one row per turn uses verl's own grpo estimator for both algorithms: under the
    # v1 trainer it normalises over trajectories, not turn rows (that agent's loop checks it)
    rollout = (root.get("actor_rollout_ref") or {}).get("rollout") or {}
    plugin = verl_loop_plugin((rollout.get("agent") or {}).get("default_agent_loop"))
    per_turn = plugin is not None and plugin.rows_per_turn
    if adv is not None and not per_turn and (adv == "ggpo") != (settings.algorithm == "ggpo"):
        raise PluginSettingsError(f"vrag.algorithm={settings.algorithm!r} but algorithm.adv_estimator={adv!r}: "
                                  "GGPO needs both (the loop prunes the mask, the estimator reads it)")
    actor = ((root.get("actor_rollout_ref") or {}).get("actor") or {})
    loss_mode = (actor.get("policy_loss") or {}).get("loss_mode")
    agg = actor.get("loss_agg_mode")
    algo = settings.algorithm_settings
    if (loss_mode is not None and loss_mode != algo.loss_mode) or (agg is not None and agg != algo.loss_agg_mode):
        raise PluginSettingsError(
            f"vrag.algorithm={algo.algorithm!r} is optimised with actor.policy_loss.loss_mode={algo.loss_mode!r} and "
            f"actor.loss_agg_mode={algo.loss_agg_mode!r} (the local trainer's objective too), but the config sets "
            f"{loss_mode!r} / {agg!r}")
    data = root.get("data") or {}
    response = data.get("max_response_length")
    if response is not None and settings.agent.max_tokens > response:
        raise PluginSettingsError(f"vrag.agent.max_tokens ({settings.agent.max_tokens}) exceeds "
                                  f"data.max_response_length ({response}), which holds every turn")
    rollout = ((root.get("actor_rollout_ref") or {}).get("rollout") or {})
    max_len = rollout.get("max_model_len")
    prompt = data.get("max_prompt_length")
    if max_len is not None and prompt is not None and response is not None and prompt + response > max_len:
        raise PluginSettingsError(f"data.max_prompt_length + data.max_response_length ({prompt + response}) "
                                  f"exceeds actor_rollout_ref.rollout.max_model_len ({max_len})")
