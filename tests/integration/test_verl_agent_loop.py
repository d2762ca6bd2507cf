"""The `vrag_agent` plugin end to end on CPU, built by Hydra exactly as verl's agent-loop worker builds it.

- the row comes from our parquet through verl's own `RLHFDataset`;
- the search is the real search API (`search_engine.api`) on loopback over the generated sample corpus;
- the model side is `TinyQwenServerManagerDouble`: a TEST DOUBLE of verl's server manager
  (`LLMServerClient.generate(request_id, prompt_ids=, sampling_params=, image_data=) -> TokenOutput`,
  the interface verl documents) backed by the tiny transformers Qwen2.5-VL of `testkit`. A random tiny
  model cannot choose sensible actions, so in the full-episode test the double emits scripted reply
  texts as token ids and the tiny model computes their logprobs on the whole conversation with its
  images (teacher forcing); the sampling test lets the tiny model sample freely.
- the `AgentLoopOutput` is checked field by field, then handed to verl's own worker post-processing
  (padding, multimodal inputs re-built from the ids and images, rm_scores) to prove verl accepts it;
- last, verl's own `AgentLoopWorker` (in-process instead of a Ray actor, the double as its LLM client)
  runs the plugin from a DataProto of our rows, and its output batch goes through `compute_advantage`.
"""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("verl")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from vrag_rl.agent.policies.local_transformers import (  # noqa: E402
    LocalTransformersGenerate,
    expected_image_tokens,
    image_token_id,
    vision_inputs,
)
from vrag_rl.agent.policy import SamplingParams  # noqa: E402
from vrag_rl.training.data import convert_file, write_parquet  # noqa: E402

CONFIG_DIR = Path(__file__).resolve().parents[2] / "configs" / "verl"
REPLIES = [
    "<think>I should search for the revenue.</think><search>Acme Robotics total revenue 2023</search>",
    "<think>zoom</think><bbox>[0, 0, 20, 20]</bbox>",
    "<think>The table says it.</think><answer>$341 million</answer>",
]
REFERENCE_PAGE = "acme_annual_report_2023_2"
GGPO = ["vrag.algorithm=ggpo", "algorithm.adv_estimator=ggpo", "actor_rollout_ref.actor.policy_loss.loss_mode=gspo",
        "actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean"]  # what configs/verl/parts/ggpo.yaml sets


class TinyQwenServerManagerDouble:
    """Test double of verl's server manager, backed by the tiny transformers Qwen2.5-VL (see module docstring)."""

    def __init__(self, model, processor, replies: list[str] | None = None):
        self.model, self.processor = model, processor
        self.tokenizer = processor.tokenizer
        self.replies = list(replies) if replies is not None else None
        self.scripts: dict[str, list[str]] = {}  # per request id (one per episode): concurrent episodes
        self.sampler = LocalTransformersGenerate(model, processor)
        self.calls: list[dict] = []

    async def generate(self, request_id, *, prompt_ids, sampling_params, image_data=None, video_data=None,
                       audio_data=None, mm_processor_kwargs=None, **kwargs):
        from verl.workers.rollout.replica import TokenOutput

        images = list(image_data or [])
        self.calls.append({"request_id": request_id, "prompt_len": len(prompt_ids), "images": len(images),
                           "sampling_params": dict(sampling_params)})
        if self.replies is None:
            out = await self.sampler(prompt_ids, SamplingParams(temperature=sampling_params["temperature"],
                                                                top_p=sampling_params["top_p"],
                                                                max_tokens=sampling_params["max_tokens"], seed=7),
                                     images)
            self.calls[-1]["n_tokens"] = len(out.token_ids)
            return TokenOutput(token_ids=out.token_ids, log_probs=out.logprobs, stop_reason="completed")
        script = self.scripts.setdefault(request_id, list(self.replies))
        ids = self.tokenizer(script.pop(0), add_special_tokens=False)["input_ids"]
        ids = ids + [self.tokenizer.convert_tokens_to_ids("<|im_end|>")]
        return TokenOutput(token_ids=ids, log_probs=self._logprobs(prompt_ids, ids, images), stop_reason="completed")

    def _logprobs(self, prompt_ids: list[int], ids: list[int], images) -> list[float]:
        sequence = torch.tensor([prompt_ids + ids])
        with torch.no_grad():
            logits = self.model(input_ids=sequence, attention_mask=torch.ones_like(sequence),
                                **vision_inputs(self.processor, images)).logits[0].float()
        logprobs = torch.log_softmax(logits[len(prompt_ids) - 1:-1], -1)
        return logprobs.gather(-1, torch.tensor(ids).unsqueeze(-1)).squeeze(-1).tolist()


@pytest.fixture(scope="module")
def tiny(tiny_qwen25vl_dir):
    from transformers import AutoModelForImageTextToText, AutoProcessor

    return AutoModelForImageTextToText.from_pretrained(tiny_qwen25vl_dir).eval(), \
        AutoProcessor.from_pretrained(tiny_qwen25vl_dir)


@pytest.fixture(scope="module")
def row(tmp_path_factory, sample_corpus, tiny):
    """The revenue question of the sample corpus, as verl's RLHFDataset yields it from our parquet."""
    from omegaconf import OmegaConf
    from verl.utils.dataset.rl_dataset import RLHFDataset

    rows, _ = convert_file(sample_corpus.dataset_path, data_source="sample")
    path = write_parquet(rows[:1], tmp_path_factory.mktemp("rl") / "train.parquet")
    config = OmegaConf.create({"prompt_key": "prompt", "image_key": "images", "max_prompt_length": 1024,
                               "return_raw_chat": True, "dataloader_num_workers": 0, "truncation": "error",
                               "cache_dir": str(path.parent / "cache")})
    item = RLHFDataset(data_files=[str(path)], tokenizer=tiny[1].tokenizer, config=config, processor=tiny[1])[0]
    assert item["extra_info"]["reference_page_ids"] == [REFERENCE_PAGE]
    kwargs = {k: v for k, v in item.items() if k not in ("dummy_tensor", "agent_name")}
    return {**kwargs, "uid": "q-revenue"}, item["agent_name"]


def _loop_and_config(server_manager, processor, search_url: str, overrides: list[str] = ()):
    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap, _agent_loop_registry
    from verl.utils.dataset.rl_dataset import RLHFDataset

    import vrag_rl.training.verl_plugins.register  # noqa: F401  (what external_lib does in verl's workers)

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        cfg = compose(config_name="grpo_qwen2_5_vl_7b", overrides=[
            f"vrag.search.url={search_url}", "data.max_prompt_length=1024", "data.max_response_length=2048",
            "actor_rollout_ref.rollout.max_model_len=3072", "vrag.agent.max_tokens=64",
            "vrag.agent.min_pixels=3136", "vrag.agent.max_pixels=12544", *overrides])
    OmegaConf.resolve(cfg)
    loop = instantiate(_agent_loop_registry["vrag_agent"], trainer_config=DictConfigWrap(cfg),
                       server_manager=server_manager, tokenizer=processor.tokenizer, processor=processor,
                       hf_model_type="qwen2_5_vl", dataset_cls=RLHFDataset, data_config=DictConfigWrap(cfg.data),
                       tools=ToolListWrap([]))
    return loop, cfg


def _sampling(cfg) -> dict:
    rollout = cfg.actor_rollout_ref.rollout  # what AgentLoopWorker.generate_sequences passes to run()
    return {"temperature": rollout.temperature, "top_p": rollout.top_p, "top_k": rollout.top_k,
            "repetition_penalty": 1.0, "logprobs": rollout.calculate_log_probs}


def _verl_postprocess(output, cfg, processor, raw_prompt):
    """verl's own AgentLoopWorker post-processing of one output, then its batch assembly (a DataProto)."""
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.utils.config import omega_conf_to_dataclass

    worker = object.__new__(AgentLoopWorker)
    worker.config = cfg
    worker.rollout_config = omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout)
    worker.tokenizer, worker.processor = processor.tokenizer, processor
    worker.reward_loop_worker_handles, worker.distillation_enabled, worker.mm_processor_kwargs = None, False, {}
    internal = asyncio.run(worker._agent_loop_postprocess(output, False, raw_prompt=raw_prompt))
    return worker._postprocess([internal])


def test_agent_loop_runs_a_real_episode_and_returns_what_verl_trains_on(tiny, row, text_search_server):
    model, processor = tiny
    kwargs, agent_name = row
    assert agent_name == "vrag_agent"
    tok = processor.tokenizer
    double = TinyQwenServerManagerDouble(model, processor, REPLIES)
    loop, cfg = _loop_and_config(double, processor, text_search_server.url)
    output = asyncio.run(loop.run(_sampling(cfg), **kwargs))

    # the model side: three turns on one sticky request id, verl's sampling, the agent's per-turn budget
    assert [c["images"] for c in double.calls] == [0, 1, 2]
    assert len({c["request_id"] for c in double.calls}) == 1
    assert all(c["sampling_params"]["temperature"] == 1.0 and c["sampling_params"]["max_tokens"] == 64
               and c["sampling_params"]["logprobs"] for c in double.calls)

    # prompt_ids: the system prompt and question the dataset row holds, rendered with the generation prompt
    text = processor.apply_chat_template(kwargs["raw_prompt"], add_generation_prompt=True, tokenize=False)
    assert output.prompt_ids == tok(text, add_special_tokens=False)["input_ids"]

    # response_mask: 1 on exactly the model's tokens (each reply + its end-of-turn token), 0 on observations
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    replies = [tok(r, add_special_tokens=False)["input_ids"] + [im_end] for r in REPLIES]
    model_positions = [i for i, m in enumerate(output.response_mask) if m == 1]
    assert [output.response_ids[i] for i in model_positions] == [t for reply in replies for t in reply]
    assert len(output.response_ids) == len(output.response_mask) == len(output.response_logprobs)
    assert len(model_positions) < len(output.response_ids)  # observations are there, masked out
    assert output.response_ids[-len(replies[-1]):] == replies[-1] and output.response_mask[-1] == 1
    # logprobs: the tiny model's, at the model's tokens; 0 at observation tokens
    assert all(output.response_logprobs[i] < 0 for i in model_positions)
    assert all(lp == 0.0 for i, lp in enumerate(output.response_logprobs) if output.response_mask[i] == 0)
    image_token = image_token_id(processor)
    assert all(m == 0 for i, m in enumerate(output.response_mask) if output.response_ids[i] == image_token)

    # images: the page and the crop the model saw, exactly as many image tokens as they need
    images = output.multi_modal_data["images"]
    assert len(images) == 2 and images[1].tobytes() != images[0].tobytes()  # the page, then the zoomed crop
    ids = torch.tensor(output.prompt_ids + output.response_ids)
    grid = vision_inputs(processor, images)["image_grid_thw"]
    assert int((ids == image_token_id(processor)).sum()) == expected_image_tokens(processor, grid)

    # extra fields: pages per turn (per query, in rank order), the turn graph, reward parts
    extra = output.extra_fields
    assert extra["turn_actions"] == ["search", "crop", "answer"] and extra["episode_status"] == "answered"
    assert extra["pages_per_turn"][0][0][0] == REFERENCE_PAGE and extra["pages_per_turn"][1:] == [[], []]
    assert extra["shown_pages"] == [REFERENCE_PAGE]
    graph = extra["credit_graph"]
    assert graph["answer_id"] == "t2" and {n["node_id"]: n["parent_ids"] for n in graph["nodes"]} == \
        {"t0": ["root"], "t1": ["t0"], "t2": ["t0", "t1"]}  # the answer reads the page and the crop
    parts = extra["reward_parts"]
    assert (parts["outcome"], parts["format"], parts["retrieval"]) == (1.0, 1.0, 1.0)  # EM, well-formed, page first
    assert output.reward_score == pytest.approx(parts["total"]) == pytest.approx(1.0)
    assert extra["reward_extra_info"]["vrag/outcome"] == 1.0 and extra["ggpo_pruned_turns"] == []
    assert output.num_turns == 6

    # reward.py (verl's reward-worker path) scores the same from the record the loop left
    from vrag_rl.training.verl_plugins.reward import compute_score

    scored = asyncio.run(compute_score("sample", "ignored", "$341 million", {**kwargs["extra_info"], **extra}))
    assert scored["score"] == pytest.approx(output.reward_score)

    # verl's own post-processing accepts it: padded tensors, pixel values for both images, reward at the end
    batch = _verl_postprocess(output, cfg, processor, kwargs["raw_prompt"])
    response_length = cfg.actor_rollout_ref.rollout.response_length
    assert batch.batch["responses"].shape == (1, response_length)
    assert batch.batch["response_mask"][0].sum().item() == len(model_positions)
    assert batch.batch["rm_scores"][0, len(output.response_ids) - 1].item() == pytest.approx(1.0)
    mm = batch.non_tensor_batch["multi_modal_inputs"][0]
    assert torch.equal(mm["image_grid_thw"], grid)
    assert batch.non_tensor_batch["pages_per_turn"][0][0][0][0] == REFERENCE_PAGE


def test_ggpo_zeroes_the_turn_that_added_nothing_in_a_correct_episode(tiny, row, text_search_server):
    """A correct episode whose first turn put nothing into the context (no action): GGPO prunes its tokens."""
    model, processor = tiny
    kwargs, _ = row
    replies = ["<think>look</think>I am not sure yet.", *REPLIES[:1],
               "<think>done</think><answer>$341 million</answer>"]
    double = TinyQwenServerManagerDouble(model, processor, replies)
    loop, cfg = _loop_and_config(double, processor, text_search_server.url,
                                 GGPO)
    output = asyncio.run(loop.run(_sampling(cfg), **kwargs))
    extra = output.extra_fields
    assert extra["turn_actions"] == ["invalid", "search", "answer"]
    assert extra["reward_parts"]["outcome"] == 1.0
    assert extra["ggpo_pruned_turns"] == [0]  # the invalid turn is off the root→answer path
    tok = processor.tokenizer
    first = tok(replies[0], add_special_tokens=False)["input_ids"]
    assert output.response_ids[:len(first)] == first
    assert output.response_mask[:len(first) + 1] == [0] * (len(first) + 1)  # the reply and its end-of-turn token
    kept = sum(len(tok(reply, add_special_tokens=False)["input_ids"]) for reply in replies[1:])
    assert sum(output.response_mask) == kept + 2  # two unpruned turns, each with its end-of-turn token


def test_free_sampling_of_the_tiny_model_still_returns_a_consistent_output(tiny, row, text_search_server):
    """The tiny random model samples garbage: the episode fails cleanly, the output is still well-formed."""
    model, processor = tiny
    kwargs, _ = row
    double = TinyQwenServerManagerDouble(model, processor, replies=None)
    loop, cfg = _loop_and_config(double, processor, text_search_server.url, ["vrag.agent.max_tokens=8"])
    output = asyncio.run(loop.run(_sampling(cfg), **kwargs))
    assert output.extra_fields["episode_status"] in ("failed", "forced_answer", "answered")
    assert sum(output.response_mask) == sum(c["n_tokens"] for c in double.calls)  # every sampled token, mask 1
    assert all(0 < c["n_tokens"] <= 8 for c in double.calls)
    assert output.reward_score == pytest.approx(output.extra_fields["reward_parts"]["total"])
    assert len(output.response_logprobs) == len(output.response_ids)
    _verl_postprocess(output, cfg, processor, kwargs["raw_prompt"])


def test_verls_own_agent_loop_worker_runs_the_plugin_from_a_parquet_batch(tiny, tiny_qwen25vl_dir, row,
                                                                          text_search_server, tmp_path):
    """verl's AgentLoopWorker (in-process, the double as its LLM client) turns a DataProto of our rows into
    the training batch: 2 rollouts per question, rm_scores from our reward, GGPO's estimator on its mask."""
    from verl import DataProto
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.trainer.config import AlgoConfig
    from verl.trainer.ppo.ray_trainer import compute_advantage
    from verl.utils.dataset.rl_dataset import collate_fn

    model, processor = tiny
    kwargs, agent_name = row
    double = TinyQwenServerManagerDouble(model, processor, REPLIES)
    _loop, cfg = _loop_and_config(double, processor, text_search_server.url, [
        *GGPO, f"actor_rollout_ref.model.path={tiny_qwen25vl_dir}",
        "actor_rollout_ref.rollout.n=2"])
    worker = AgentLoopWorker(cfg, llm_client=double)
    item = {**kwargs, "agent_name": agent_name}
    item.pop("uid")
    batch = DataProto.from_single_dict(collate_fn([{**item, "dummy_tensor": torch.zeros(1, dtype=torch.uint8)}]))
    batch = batch.repeat(repeat_times=2, interleave=True)
    batch.non_tensor_batch["uid"] = np.array(["q-revenue", "q-revenue"], dtype=object)
    out = asyncio.run(worker.generate_sequences(batch))

    assert len(double.scripts) == 2 and all(script == [] for script in double.scripts.values())
    assert out.batch["rm_scores"].sum(-1).tolist() == pytest.approx([1.0, 1.0])
    assert list(out.non_tensor_batch["episode_status"]) == ["answered", "answered"]
    assert len(out.non_tensor_batch["multi_modal_inputs"][0]["image_grid_thw"]) == 2
    assert out.meta_info["reward_extra_keys"] and "vrag/retrieval" in out.non_tensor_batch
    out.non_tensor_batch["uid"] = batch.non_tensor_batch["uid"]
    out.batch["token_level_rewards"] = out.batch["rm_scores"]
    advantages = compute_advantage(out, "ggpo", config=AlgoConfig(adv_estimator="ggpo")).batch["advantages"]
    assert advantages.abs().sum() == 0  # equal rewards in the group: no signal, as in GRPO
    assert out.batch["response_mask"].sum() == 2 * sum(
        len(processor.tokenizer(r, add_special_tokens=False)["input_ids"]) + 1 for r in REPLIES)
