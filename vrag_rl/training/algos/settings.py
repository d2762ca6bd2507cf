"""The RL algorithm's settings: one type and one vocabulary for the local trainer and the verl plugin.

Both the local YAML run config (`vrag_rl.training.train.config`) and the `vrag:` section of a verl config
(`vrag_rl.training.verl_plugins.settings`) say the same two things with the same keys:

    algorithm: grpo | ggpo | gspo
    ggpo:
      correct_threshold: 0.5   # outcome score at which GGPO counts a trajectory as correct (r = 1)

and both read them through `algorithm_settings`, so a run means the same thing on a laptop and on a
cluster: the same prune mask (`Trajectory.ggpo_pruned_turns`) and the same objective
(`vrag_rl.training.algos.objective.policy_objective`, equal to verl's `ppo_loss` with the loss settings below).

An unknown key is refused with the keys that are allowed (and the closest one), never ignored.

`gspo` is GGPO without the prune mask (GSPO's sequence ratio, "seq-mean-token-mean", nothing pruned): the
baseline the VimRAG paper ablates GGPO against, so a comparison can tell the mask's effect from the objective's
(docs/algorithms_tiny.md). On verl it is verl's own `gspo` loss with the `grpo` estimator.

Why the threshold defaults to 0.5: GGPO's rule is stated for a binary outcome (r ∈ {0, 1}); for a binary
outcome (exact match, a yes/no judge) every threshold in (0, 1] gives the same mask, so the default only
matters for graded outcomes (token F1, ANLS, a graded judge). There 0.5 is the midpoint ("more right than
wrong", the cut-off ANLS itself uses), while 1.0 would call a 0.9-F1 answer wrong, and GGPO would prune the
evidence-finding steps of an answer whose advantage is usually positive: it would remove exactly the
gradient that should reinforce them. The local trainer used 1.0 and the cluster 0.5 before; the
cluster's value is kept, so cluster runs do not change.
"""
from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

ALGORITHMS = ("grpo", "ggpo", "gspo")
DEFAULT_CORRECT_THRESHOLD = 0.5

# what each algorithm optimises, in verl's own vocabulary (actor.policy_loss.loss_mode, actor.loss_agg_mode)
LOSS_MODE = {"grpo": "vanilla", "ggpo": "gspo", "gspo": "gspo"}
LOSS_AGG_MODE = {"grpo": "token-mean", "ggpo": "seq-mean-token-mean", "gspo": "seq-mean-token-mean"}

_GGPO_KEYS = {"correct_threshold"}


def suggestion(unknown: list[str], known: Iterable[str], prefix: str = "") -> str:
    """"; did you mean X?" for the closest known key to the first unknown one (difflib), else ""."""
    close = difflib.get_close_matches(unknown[0], list(known), n=1, cutoff=0.6) if unknown else []
    return f"; did you mean {prefix}{close[0]}?" if close else ""


class AlgorithmSettingsError(ValueError):
    """The algorithm keys name an unknown algorithm, an unknown key, or a threshold outside (0, 1]."""


@dataclass(frozen=True)
class GGPOSettings:
    """GGPO's one knob: the outcome score from which a trajectory counts as correct (see the module docstring)."""

    correct_threshold: float = DEFAULT_CORRECT_THRESHOLD

    def __post_init__(self) -> None:
        if not 0.0 < float(self.correct_threshold) <= 1.0:
            raise AlgorithmSettingsError(f"ggpo.correct_threshold must be in (0, 1], got {self.correct_threshold}")


@dataclass(frozen=True)
class AlgorithmSettings:
    """Which algorithm, and GGPO's settings; the loss settings follow from the algorithm (one objective each)."""

    algorithm: str = "grpo"
    ggpo: GGPOSettings = field(default_factory=GGPOSettings)

    def __post_init__(self) -> None:
        if self.algorithm not in ALGORITHMS:
            raise AlgorithmSettingsError(f"algorithm must be one of {ALGORITHMS}, got {self.algorithm!r}")

    @property
    def prunes(self) -> bool:
        """True for GGPO: the loss mask loses the pruned turns."""
        return self.algorithm == "ggpo"

    @property
    def loss_mode(self) -> str:
        """verl's `actor.policy_loss.loss_mode` for this algorithm (GRPO: PPO-clip per token; GGPO, GSPO: GSPO)."""
        return LOSS_MODE[self.algorithm]

    @property
    def loss_agg_mode(self) -> str:
        """verl's `actor.loss_agg_mode` for this algorithm."""
        return LOSS_AGG_MODE[self.algorithm]

    def is_correct(self, outcome: float) -> bool:
        """GGPO's r = 1: the outcome score reaches `ggpo.correct_threshold`."""
        return float(outcome) >= self.ggpo.correct_threshold


def algorithm_settings(section: dict[str, Any], where: str = "") -> AlgorithmSettings:
    """Read `algorithm` and `ggpo` from a config mapping (the keys are removed from `section`).

    `where` prefixes key names in messages (e.g. "vrag."). An unknown key under `ggpo` raises
    `AlgorithmSettingsError` naming the allowed ones (a run must not silently fall back to a default); the
    caller checks the keys beside `algorithm` and `ggpo`.
    """
    algorithm = section.pop("algorithm", None)
    ggpo = section.pop("ggpo", None)
    ggpo = dict(ggpo or {}) if isinstance(ggpo, dict) or ggpo is None else ggpo
    if not isinstance(ggpo, dict):
        raise AlgorithmSettingsError(f"{where}ggpo must be a mapping, got {type(ggpo).__name__}")
    extra = sorted(set(ggpo) - _GGPO_KEYS)
    if extra:
        raise AlgorithmSettingsError(f"{where}ggpo: unknown key(s) {extra}; allowed: {sorted(_GGPO_KEYS)}"
                                     f"{suggestion(extra, _GGPO_KEYS, where + 'ggpo.')}")
    try:
        threshold = float(ggpo.get("correct_threshold", DEFAULT_CORRECT_THRESHOLD))
    except (TypeError, ValueError):
        raise AlgorithmSettingsError(f"{where}ggpo.correct_threshold must be a number, "
                                     f"got {ggpo.get('correct_threshold')!r}") from None
    return AlgorithmSettings(algorithm=str(algorithm if algorithm is not None else "grpo"),
                             ggpo=GGPOSettings(correct_threshold=threshold))
