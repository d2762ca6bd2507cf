"""The training forward pass: log-probabilities (and entropy) of a trajectory's response tokens.

The whole sequence (prompt + response, observations included) goes through the model with the
trajectory's images (`pixel_values`, `image_grid_thw` from the same processor the rollout used);
`model_inputs` refuses a trajectory whose image tokens and images disagree, so no step is ever
trained blind. Qwen2.5-VL computes its 3-D mRoPE positions from the ids and the image grid itself
(upstream VRAG-RL overrode them with 1-D positions in training only: a train/inference mismatch).
"""
from __future__ import annotations

from typing import Any

import torch

from vrag_rl.training.algos import entropy_from_logits
from vrag_rl.training.rollout.trajectory import TokenizedSample, model_inputs


def response_logprobs(model: Any, processor: Any, trajectory: TokenizedSample, temperature: float = 1.0,
                      with_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(log π(response_t | context), entropy_t or None), each of shape (1, len(response_ids)).

    Logits are divided by the sampling temperature, as verl's actor does, so the ratio compares the
    distribution that was sampled from.
    """
    inputs = model_inputs(trajectory, processor, model)
    start = inputs.pop("response_start")
    device = next(model.parameters()).device
    inputs = {k: v.to(device) for k, v in inputs.items()}
    logits = model(**inputs).logits[:, start - 1:-1].float()
    if temperature > 0 and temperature != 1.0:
        logits = logits / temperature
    targets = inputs["input_ids"][:, start:]
    logprobs = torch.log_softmax(logits, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    entropy = entropy_from_logits(logits) if with_entropy else None
    return logprobs, entropy
