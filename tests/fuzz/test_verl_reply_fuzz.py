"""Fuzz of the verl path: whatever token ids the rollout server returns, the `vrag_agent` loop hands verl a
valid output, and verl's conversions accept it.

Each episode's server replies are drawn (seeded) from: well-formed actions, the same with a vision
special token spliced in (`<|image_pad|>`, `<|video_pad|>`, `<|vision_start|>`, `<|vision_end|>`), random
ids over the whole vocabulary (special tokens included), an empty generation, an aborted request. The
server side is a TEST DOUBLE of verl's `LLMServerClient.generate` (`TokenOutput` with `extra_fields`
holding `global_steps` / `min_global_steps` / `max_global_steps`, as verl's client sets them); the
search is the real search API on loopback. For every episode:
- `run` returns (no exception: 0 crashes) an `AgentLoopOutput` with at least one response token, lengths
  that agree, the weight-version fields the v1 trainer reads, and a finite reward;
- its ids hold exactly as many image tokens as its images' features, and no image token has mask 1;
- verl's v1 conversion (`AgentLoopOutput.as_dict`, what `AgentLoopWorkerTQ` stores) and its v0
  post-processing and batch assembly (`AgentLoopWorker._agent_loop_postprocess` / `_postprocess`) accept it.
"""
from __future__ import annotations

import asyncio
import math
import random
from pathlib import Path

import pytest

pytest.importorskip("verl")

import torch  # noqa: E402

from vrag_rl.agent.policies.local_transformers import expected_image_tokens, image_token_id, vision_inputs  # noqa: E402

CONFIG_DIR = Path(__file__).resolve().parents[2] / "configs" / "verl"
EPISODES = 40
ACTIONS = [
    "<think>search</think><search>Acme Robotics total revenue 2023</search>",
    "<think>search</think><search>solar plant capacity</search>",
    "<think>zoom</think><bbox>[0, 0, 20, 20]</bbox>",
    "<think>done</think><answer>$341 million</answer>",
    "<think>hmm</think>",
]
VISION = ["<|image_pad|>", "<|video_pad|>", "<|vision_start|>", "<|vision_end|>"]


class FuzzServerManager:
    """TEST DOUBLE of verl's `LLMServerClient` (see the module docstring); replies drawn per call from `rng`."""

    def __init__(self, tokenizer, rng: random.Random):
        self.tokenizer, self.rng = tokenizer, rng
        self.im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
        self.kinds: list[str] = []

    def _reply(self) -> tuple[str, list[int] | None]:
        kind = self.rng.choice(["action", "action", "vision", "random", "empty", "aborted"])
        ids = self.tokenizer(self.rng.choice(ACTIONS), add_special_tokens=False)["input_ids"] + [self.im_end]
        if kind == "vision":
            at = self.rng.randrange(len(ids))
            ids = ids[:at] + [self.tokenizer.convert_tokens_to_ids(self.rng.choice(VISION))] * self.rng.randint(1, 3) \
                + ids[at:]
        elif kind == "random":
            ids = [self.rng.randrange(len(self.tokenizer)) for _ in range(self.rng.randint(1, 12))]
        elif kind == "empty":
            ids = []
        elif kind == "aborted":
            ids = None
        return kind, ids

    async def generate(self, request_id, *, prompt_ids, sampling_params, image_data=None, **kwargs):
        from verl.workers.rollout.replica import TokenOutput

        kind, ids = self._reply()
        self.kinds.append(kind)
        extra = {"global_steps": 3, "min_global_steps": 3, "max_global_steps": 3}  # as LLMServerClient sets them
        if ids is None:
            return TokenOutput(token_ids=[], stop_reason="aborted", extra_fields=extra)
        ids = ids[: sampling_params["max_tokens"]]
        return TokenOutput(token_ids=ids, log_probs=[-self.rng.random() for _ in ids], stop_reason="completed",
                           num_preempted=0, extra_fields=extra)


@pytest.fixture(scope="module")
def processor(tiny_qwen25vl_dir):
    from transformers import AutoProcessor

    return AutoProcessor.from_pretrained(tiny_qwen25vl_dir)


def _loop(manager, processor, search_url: str, model_dir):
    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap, _agent_loop_registry
    from verl.utils.dataset.rl_dataset import RLHFDataset

    import vrag_rl.training.verl_plugins.register  # noqa: F401

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        cfg = compose(config_name="ggpo_qwen2_5_vl_7b", overrides=[
            f"vrag.search.url={search_url}", "data.max_prompt_length=1024", "data.max_response_length=1024",
            "actor_rollout_ref.rollout.max_model_len=2048", "vrag.agent.max_tokens=32", "vrag.agent.max_turns=3",
            "vrag.agent.min_pixels=3136", "vrag.agent.max_pixels=6272", f"actor_rollout_ref.model.path={model_dir}"])
    OmegaConf.resolve(cfg)
    loop = instantiate(_agent_loop_registry["vrag_agent"], trainer_config=DictConfigWrap(cfg), server_manager=manager,
                       tokenizer=processor.tokenizer, processor=processor, hf_model_type="qwen2_5_vl",
                       dataset_cls=RLHFDataset, data_config=DictConfigWrap(cfg.data), tools=ToolListWrap([]))
    return loop, cfg


def _row() -> dict:
    return {"extra_info": {"question": "What was Acme Robotics' total revenue in 2023?",
                           "reference_answers": ["$341 million"], "reference_page_ids": ["acme_annual_report_2023_2"]},
            "reward_model": {"ground_truth": "$341 million"}, "raw_prompt": [], "uid": "fuzz"}


def test_fuzzed_server_replies_never_crash_the_verl_path(processor, tiny_qwen25vl_dir, text_search_server):
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.utils.config import omega_conf_to_dataclass

    rng = random.Random(20261125)
    manager = FuzzServerManager(processor.tokenizer, rng)
    loop, cfg = _loop(manager, processor, text_search_server.url, tiny_qwen25vl_dir)
    worker = object.__new__(AgentLoopWorker)  # verl's v0 post-processing, in-process
    worker.config, worker.rollout_config = cfg, omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout)
    worker.tokenizer, worker.processor = processor.tokenizer, processor
    worker.reward_loop_worker_handles, worker.distillation_enabled, worker.mm_processor_kwargs = None, False, {}
    image_token = image_token_id(processor)
    crashes, statuses, internals = [], [], []
    for episode in range(EPISODES):
        try:
            output = asyncio.run(loop.run({"temperature": 1.0, "top_p": 1.0, "top_k": -1, "logprobs": True},
                                          **{**_row(), "session_id": episode}))
            extra = output.extra_fields
            statuses.append(extra["episode_status"])
            if extra["episode_error"].startswith(("internal error", "policy adapter failed")):
                internals.append(extra["episode_error"])
            n = len(output.response_ids)
            assert n >= 1 and n == len(output.response_mask) == len(output.response_logprobs)
            assert extra["min_global_steps"] == extra["max_global_steps"] == 3
            assert math.isfinite(output.reward_score)
            images = (output.multi_modal_data or {}).get("images", [])
            ids = torch.tensor(output.prompt_ids + output.response_ids)
            grid = vision_inputs(processor, images).get("image_grid_thw")
            assert int((ids == image_token).sum()) == (expected_image_tokens(processor, grid) if images else 0)
            assert all(m == 0 for t, m in zip(output.response_ids, output.response_mask) if t == image_token)
            output.as_dict()  # verl's v1 conversion (AgentLoopWorkerTQ stores this)
            internal = asyncio.run(worker._agent_loop_postprocess(output, False, raw_prompt=[]))
            worker._postprocess([internal])  # verl's v0 batch assembly
        except Exception as exc:  # noqa: BLE001 - a crash of any kind is what this test counts
            crashes.append(f"episode {episode}: {exc.__class__.__name__}: {exc}")
    assert crashes == [], crashes[:3]
    assert internals == [], internals[:3]  # every bad reply was a handled input, not a bug hit
    assert {"vision", "empty", "aborted", "random"} <= set(manager.kinds)  # the mix really reached the loop
    assert "failed" in statuses and len(statuses) == EPISODES
