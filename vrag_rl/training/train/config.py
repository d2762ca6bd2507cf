"""One YAML file per run (`configs/local/*.yaml`) → `TrainConfig`.

Every knob of a local run lives here so a run is described by its file alone: the model, the task,
the agent (`AgentConfig` fields), the prompts, the reward (`RewardConfig`), the algorithm and the
optimiser. Unknown keys are an error (a typo must not silently fall back to a default).

The algorithm keys are the same as in the verl plugin's `vrag:` section (`algorithm: grpo | ggpo | gspo`,
`ggpo.correct_threshold`), read by the same function (`vrag_rl.training.algos.settings.algorithm_settings`).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from vrag_rl.agent.plugins import AgentPlugin, agent_plugin
from vrag_rl.training.algos.settings import AlgorithmSettings, GGPOSettings, algorithm_settings, suggestion
from vrag_rl.training.rewards import RewardConfig


@dataclass
class LoraConfig:
    r: int = 8
    alpha: int = 16
    dropout: float = 0.0
    target_modules: list[str] = field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"])


@dataclass
class SFTConfig:
    data: str | None = None  # SFT JSON (messages + images); None: no warm start
    epochs: int = 1
    lr: float = 1e-5
    batch_size: int = 8  # records per optimiser step


@dataclass
class TrainConfig:
    model: str  # path or hub id of a transformers VLM
    tasks: str  # JSON list of {"id", "question", "answer", "reference_pages"}
    output_dir: str
    search_url: str = "http://127.0.0.1:8002"
    # "grpo" (token-level PPO-clip) | "ggpo" (GSPO sequence ratio + GGPO prune mask) | "gspo" (GGPO without the mask)
    algorithm: str = "grpo"
    ggpo: GGPOSettings = field(default_factory=GGPOSettings)  # correct_threshold (default 0.5, see algos/settings)
    seed: int = 0
    steps: int = 100
    questions_per_step: int = 4
    rollouts_per_question: int = 5  # the GRPO group size (upstream n_agent = 5)
    lr: float = 1e-6
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    ppo_epochs: int = 1  # optimiser steps per rollout batch (each a full pass, gradients accumulated over it)
    clip_low: float = 0.2
    clip_high: float = 0.2
    kl_coef: float = 0.01  # low_var_kl to the reference policy (upstream 0.01); 0 = no reference model
    entropy_coef: float = 0.0  # entropy is always logged; a bonus only when > 0
    norm_adv_by_std: bool = True  # False = Dr.GRPO
    checkpoint_every: int = 10
    keep_checkpoints: int = 2
    device: str = "cpu"
    dtype: str = "float32"
    stop_strings: list[str] = field(default_factory=list)  # end a model turn at these (as vLLM's `stop`)
    freeze_vision: bool = True  # train the language model only (the paper's SFT froze vision tower + projector)
    lora: LoraConfig | None = None
    sft: SFTConfig = field(default_factory=SFTConfig)
    agent: dict[str, Any] = field(default_factory=dict)  # the agent plugin's config_type fields
    prompts: dict[str, Any] = field(default_factory=dict)  # the agent plugin's prompts_type fields
    reward: dict[str, Any] = field(default_factory=dict)  # RewardConfig fields
    agent_type: str = "vrag"  # an installed agent plugin's name (vrag_rl.agent.plugins): vrag, vimrag, ...
    agent_training: dict[str, Any] = field(default_factory=dict)  # read by the agent's trainer (its own keys)

    def __post_init__(self) -> None:
        if isinstance(self.ggpo, dict):
            self.ggpo = algorithm_settings({"algorithm": self.algorithm, "ggpo": dict(self.ggpo)}).ggpo
        self.algorithm_settings()  # validates the algorithm name
        if self.steps < 0 or self.questions_per_step < 1 or self.rollouts_per_question < 1:
            raise ValueError("need steps >= 0, questions_per_step >= 1, rollouts_per_question >= 1")
        if self.ppo_epochs < 1:
            raise ValueError("ppo_epochs must be at least 1")
        if isinstance(self.lora, dict):
            self.lora = LoraConfig(**self.lora)
        if isinstance(self.sft, dict):
            self.sft = SFTConfig(**self.sft)
        self.plugin()  # UnknownAgentError (a ValueError) naming the installed agents
        self.agent_config()  # validate early
        self.reward_config()

    def algorithm_settings(self) -> AlgorithmSettings:
        """The algorithm and GGPO settings, in the type the verl plugin uses too."""
        return AlgorithmSettings(self.algorithm, self.ggpo)

    def plugin(self) -> AgentPlugin:
        """The agent this run trains (`agent_type`, an installed plugin: `vrag_rl.agent.plugins`)."""
        return agent_plugin(self.agent_type)

    def agent_config(self) -> Any:
        """The agent's settings: its plugin's config type over the `agent:` section."""
        return self.plugin().config_type(**self.agent)

    def prompts_config(self) -> Any:
        """The agent's words: its plugin's prompts type over the `prompts:` section."""
        return self.plugin().prompts_type(**self.prompts)

    def reward_config(self) -> RewardConfig:
        return RewardConfig.from_dict(self.reward)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# sections whose own keys a misplaced top-level key is checked against (`correct_threshold` -> `ggpo.correct_threshold`)
NESTED_SECTIONS: dict[str, type] = {"ggpo": GGPOSettings, "lora": LoraConfig, "sft": SFTConfig}


def load_config(path: str | Path, **overrides: Any) -> TrainConfig:
    """Read a YAML run config; `overrides` replace top-level keys (e.g. from the command line)."""
    data = yaml.safe_load(Path(path).read_text()) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a run config is a YAML mapping")
    data.update({k: v for k, v in overrides.items() if v is not None})
    settings = algorithm_settings(data)  # pops the keys
    data.update(algorithm=settings.algorithm, ggpo=settings.ggpo)
    known = {f.name for f in fields(TrainConfig)}
    unknown = sorted(set(data) - known)
    if unknown:
        nested = [f"{name}.{f.name}" for name, section in NESTED_SECTIONS.items() for f in fields(section)]
        by_leaf = {key.rpartition(".")[2]: key for key in nested}
        hint = (f"; did you mean {by_leaf[unknown[0]]}?" if unknown[0] in by_leaf
                else suggestion(unknown, [*known, *nested]))
        raise ValueError(f"{path}: unknown config keys {unknown}; known: {sorted(known)}{hint}")
    return TrainConfig(**data)
