"""The `vimrag_agent` plugin: one VimRAG episode → one verl row per model call, through verl 0.9.1's own code.

Real: the composed cluster config (`configs/verl/ggpo_vimrag_qwen2_5_vl_7b.yaml`) validated by verl's own
checks and dataclasses; the agent loop built by Hydra as verl's worker builds it; the demo's `VimEpisode` over
the real search API on loopback (sample corpus); the tiny Qwen2.5-VL processor; verl's `AgentLoopWorker`
post-processing of every row (padding, multimodal inputs rebuilt from ids + images, rm_scores) and its batch
assembly; verl's v1 `compute_advantage_for_multi_trajectories` (the advantage path of the trainer that accepts
several outputs per run) on the rows of two sessions.
Double: verl's server manager (`ScriptedServerManagerDouble`): it returns scripted VimRAG replies as token ids
(a tiny random model cannot build a memory graph) and records what each call was sent.
"""
from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

pytest.importorskip("verl")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from vrag_rl.agent.policies.local_transformers import expected_image_tokens, image_token_id, vision_inputs  # noqa: E402
from vrag_rl.training.data import convert_file, write_parquet  # noqa: E402

CONFIG_DIR = Path(__file__).resolve().parents[2] / "configs" / "verl"
REFERENCE_PAGE = "acme_annual_report_2023_2"


def call(name: str, arguments: dict) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def memorize(label: str) -> str:
    return call("summarize_and_memorize", {"summary": "the page", "memorize": [
        {"information_id": label, "is_useful": True, "priority_score": 5}]})


SEARCH_REVENUE = call("add_search_node", {"id": "s1", "query": "Acme Robotics total revenue 2023",
                                          "parent_ids": ["root"]})
# a correct trajectory with a dead-end branch (s2: nothing builds on it)
SUCCESS = [SEARCH_REVENUE, memorize("Picture 1"),
           call("add_search_node", {"id": "s2", "query": "bicycle commuters share", "parent_ids": ["root"]}),
           memorize("Picture 2"), call("add_answer_node", {"answer": "$341 million", "parent_ids": ["s1"]})]
# a failed trajectory whose retrieval did find the reference page
FAILURE = [SEARCH_REVENUE, memorize("Picture 1"), call("add_answer_node", {"answer": "12%", "parent_ids": ["s1"]})]
OVERRIDES = ["data.max_prompt_length=2048", "data.max_response_length=256", "vrag.agent.max_tokens=128",
             "actor_rollout_ref.rollout.max_model_len=2304", "vimrag.agent.max_tokens=128",
             "vimrag.agent.search_top_k=1", "vimrag.agent.max_searches_per_turn=1", "vimrag.text_tokens=1024",
             "vimrag.agent.observation_max_pixels=12544", "vimrag.agent.energy.total_pixels=12544",
             "vimrag.agent.energy.max_pixels_image=12544"]


class ScriptedServerManagerDouble:
    """Test double of verl's server manager: per request id (one per episode) the next scripted reply."""

    def __init__(self, tokenizer, scripts: list[list[str]]):
        self.tokenizer, self.pending, self.scripts = tokenizer, [list(s) for s in scripts], {}
        self.calls: list[dict] = []

    async def generate(self, request_id, *, prompt_ids, sampling_params, image_data=None, **kwargs):
        from verl.workers.rollout.replica import TokenOutput

        if request_id not in self.scripts:
            self.scripts[request_id] = self.pending.pop(0)
        script = self.scripts[request_id]
        ids = self.tokenizer(script.pop(0), add_special_tokens=False)["input_ids"]
        ids = ids + [self.tokenizer.convert_tokens_to_ids("<|im_end|>")]
        self.calls.append({"request_id": request_id, "prompt_ids": list(prompt_ids), "images": list(image_data or []),
                           "max_tokens": sampling_params["max_tokens"], "ids": ids})
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids), stop_reason="completed")


@pytest.fixture(scope="module")
def processor(tiny_qwen25vl_dir):
    from transformers import AutoProcessor

    return AutoProcessor.from_pretrained(tiny_qwen25vl_dir)


@pytest.fixture(scope="module")
def row(tmp_path_factory, sample_corpus, processor):
    """The revenue question as verl's RLHFDataset yields it from a parquet converted for vimrag_agent."""
    from omegaconf import OmegaConf
    from verl.utils.dataset.rl_dataset import RLHFDataset

    rows, _ = convert_file(sample_corpus.dataset_path, data_source="sample", agent_name="vimrag_agent")
    path = write_parquet(rows[:1], tmp_path_factory.mktemp("rl") / "train.parquet")
    config = OmegaConf.create({"prompt_key": "prompt", "image_key": "images", "max_prompt_length": 2048,
                               "return_raw_chat": True, "dataloader_num_workers": 0, "truncation": "error",
                               "cache_dir": str(path.parent / "cache")})
    item = RLHFDataset(data_files=[str(path)], tokenizer=processor.tokenizer, config=config, processor=processor)[0]
    assert item["agent_name"] == "vimrag_agent"
    return {k: v for k, v in item.items() if k not in ("dummy_tensor", "agent_name")} | {"uid": "q-revenue"}


def _compose(overrides: list[str]):
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        cfg = compose(config_name="ggpo_vimrag_qwen2_5_vl_7b", overrides=overrides)
    OmegaConf.resolve(cfg)
    return cfg


def _loop(cfg, server_manager, processor):
    from hydra.utils import instantiate
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap, _agent_loop_registry
    from verl.utils.dataset.rl_dataset import RLHFDataset

    import vrag_rl.training.verl_plugins.register  # noqa: F401  (what external_lib does in verl's workers)

    return instantiate(_agent_loop_registry["vimrag_agent"], trainer_config=DictConfigWrap(cfg),
                       server_manager=server_manager, tokenizer=processor.tokenizer, processor=processor,
                       hf_model_type="qwen2_5_vl", dataset_cls=RLHFDataset, data_config=DictConfigWrap(cfg.data),
                       tools=ToolListWrap([]))


def _sampling(cfg) -> dict:
    rollout = cfg.actor_rollout_ref.rollout
    return {"temperature": rollout.temperature, "top_p": rollout.top_p, "top_k": rollout.top_k,
            "repetition_penalty": 1.0, "logprobs": rollout.calculate_log_probs}


def test_the_cluster_config_composes_and_validates_against_verl():
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config

    from vimrag.verl_agent_loop import vimrag_plugin_settings
    from vrag_rl.training.verl_plugins.settings import plugin_settings

    cfg = _compose([])
    validate_config(cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    rollout = omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout)
    assert rollout.agent.default_agent_loop == "vimrag_agent" and cfg.trainer.use_v1
    assert omega_conf_to_dataclass(cfg.algorithm).adv_estimator == "grpo"  # v1: normalised over trajectories
    actor = omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)
    assert actor.policy_loss.loss_mode == "gspo" and actor.loss_agg_mode == "seq-mean-token-mean"
    assert plugin_settings(cfg).algorithm == "ggpo"
    vim = vimrag_plugin_settings(cfg)
    # the memory buffer fits the prompt length: 8192 − 3072 text − 2·3·512 observation tokens ≥ the buffer
    assert vim.agent.energy.total_pixels // 784 <= 8192 - 3072 - 2 * 3 * 512
    with pytest.raises(Exception, match="adv_estimator"):
        vimrag_plugin_settings(_compose(["algorithm.adv_estimator=ggpo"]))
    with pytest.raises(Exception, match="use_v1"):
        vimrag_plugin_settings(_compose(["trainer.use_v1=false"]))
    with pytest.raises(Exception, match="unknown key"):
        vimrag_plugin_settings(_compose(["+vimrag.agent.max_turnz=3"]))


def _verl_rows(outputs, cfg, processor, raw_prompt):
    """verl's own AgentLoopWorker post-processing of every row, then its batch assembly (a DataProto)."""
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.utils.config import omega_conf_to_dataclass

    worker = object.__new__(AgentLoopWorker)
    worker.config = cfg
    worker.rollout_config = omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout)
    worker.tokenizer, worker.processor = processor.tokenizer, processor
    worker.reward_loop_worker_handles, worker.distillation_enabled, worker.mm_processor_kwargs = None, False, {}
    internal = [asyncio.run(worker._agent_loop_postprocess(o, False, raw_prompt=raw_prompt)) for o in outputs]
    return worker._postprocess(internal)


def test_steps_are_rows_that_verl_accepts_and_ggpo_drops_on_the_memory_graph(processor, row, text_search_server):
    from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories

    cfg = _compose([f"vrag.search.url={text_search_server.url}", *OVERRIDES])
    double = ScriptedServerManagerDouble(processor.tokenizer, [SUCCESS, FAILURE])
    loop = _loop(cfg, double, processor)
    success = asyncio.run(loop.run(_sampling(cfg), **row, session_id=0))
    failure = asyncio.run(loop.run(_sampling(cfg), **row, session_id=1))

    extra = success[0].extra_fields
    assert extra["episode_status"] == "answered", extra["episode_error"]
    assert extra["reward_parts"]["outcome"] == 1.0
    assert extra["pages_per_turn"][0] == [[REFERENCE_PAGE]]
    assert failure[0].extra_fields["reward_parts"]["outcome"] == 0.0
    # one row per model call; GGPO on the memory graph: the dead end s2 (steps 2, 3) dropped in the success,
    # the reference-finding s1 (steps 0, 1) spared in the failure; dropped rows first, the final row kept
    assert [o.extra_fields["turn"] for o in success] == [2, 3, 0, 1, 4]
    assert [o.extra_fields["node_ids"] for o in success] == [["s2"], ["s2"], ["s1"], ["s1"], ["answer"]]
    assert [o.extra_fields["ggpo_dropped"] for o in success] == [True, True, False, False, False]
    assert [o.extra_fields["turn"] for o in failure] == [0, 1, 2]
    assert [o.extra_fields["ggpo_dropped"] for o in failure] == [True, True, False]
    assert extra["ggpo_pruned_turns"] == [2, 3] and failure[0].extra_fields["ggpo_pruned_turns"] == [0, 1]

    # each row is exactly what its call was sent: same prompt ids, same images (same pixels, same resize),
    # the sampled ids; a step's prompt is rebuilt (not the previous call's prompt + reply)
    calls = {c["request_id"]: [] for c in double.calls}
    for c in double.calls:
        calls[c["request_id"]].append(c)
    sent = list(calls.values())
    assert [len(s) for s in sent] == [5, 3]
    image_token = image_token_id(processor)
    for outputs, episode_calls in ((success, sent[0]), (failure, sent[1])):
        for output in outputs:
            sent_call = episode_calls[output.extra_fields["turn"]]
            assert output.prompt_ids == sent_call["prompt_ids"] and output.response_ids == sent_call["ids"]
            assert len(output.prompt_ids) <= cfg.data.max_prompt_length
            assert sent_call["max_tokens"] == 128  # every step gets its own full response budget
            images = output.multi_modal_data.get("images", [])
            assert [i.tobytes() for i in images] == [i.tobytes() for i in sent_call["images"]]
            n_tokens = output.prompt_ids.count(image_token)
            grid = vision_inputs(processor, images).get("image_grid_thw") if images else None
            assert n_tokens == (expected_image_tokens(processor, grid) if images else 0)
            assert sum(output.response_mask) == (0 if output.extra_fields["ggpo_dropped"] else len(sent_call["ids"]))
    first_step = next(o for o in success if o.extra_fields["turn"] == 0)
    second_step = next(o for o in success if o.extra_fields["turn"] == 1)
    assert second_step.prompt_ids[:len(first_step.prompt_ids)] != first_step.prompt_ids + first_step.response_ids
    assert len(second_step.multi_modal_data["images"]) == 1  # the retrieved page in the tool response

    # verl's own post-processing accepts every row; v1's advantage: GRPO over the two trajectories, broadcast
    outputs = success + failure
    batch = _verl_rows(outputs, cfg, processor, row["raw_prompt"])
    assert batch.batch["responses"].shape[0] == 8
    assert batch.batch["rm_scores"].sum(-1).tolist() == pytest.approx([1.0] * 5 + [0.3] * 3)
    keys = [f"q-revenue_0_{i}" for i in range(5)] + [f"q-revenue_1_{i}" for i in range(3)]
    batch.non_tensor_batch["uid"] = np.array(["q-revenue"] * 8, dtype=object)
    batch.batch["token_level_rewards"] = batch.batch["rm_scores"]
    advantages = compute_advantage_for_multi_trajectories(batch, keys, "grpo").batch["advantages"]
    mask = batch.batch["response_mask"].bool()
    per_row = [torch.unique(advantages[i][mask[i]]).tolist() for i in range(8)]
    assert per_row[:2] == [[], []] and per_row[5:7] == [[], []]  # dropped rows: no gradient
    for i in (2, 3, 4):
        assert per_row[i] == pytest.approx([0.7071], abs=1e-3)  # two trajectories → ±1/√2, not 5 vs 3 step rows
    assert per_row[7] == pytest.approx([-0.7071], abs=1e-3)
    grids = batch.non_tensor_batch["multi_modal_inputs"]
    assert all((g is None or "image_grid_thw" not in g) == (not outputs[i].multi_modal_data)
               for i, g in enumerate(grids))


def test_a_step_prompt_over_the_prompt_length_fails_the_episode_explicitly(processor, row, text_search_server):
    """The budget is enforced before the call: the episode ends 'failed' with the reason, the rows that fit
    stay valid rows (their prompts within the limit), nothing is truncated."""
    cfg = _compose([f"vrag.search.url={text_search_server.url}", *OVERRIDES, "vimrag.text_tokens=0"])
    double = ScriptedServerManagerDouble(processor.tokenizer, [SUCCESS])
    loop = _loop(cfg, double, processor)
    first_prompt = None

    async def run(limit):
        nonlocal first_prompt
        loop.prompt_length = limit
        return await loop.run(_sampling(cfg), **row, session_id=0)

    outputs = asyncio.run(run(4096))
    first_prompt = len(outputs[[o.extra_fields["turn"] for o in outputs].index(1)].prompt_ids)
    double.pending, double.scripts, double.calls = [list(SUCCESS)], {}, []
    outputs = asyncio.run(run(first_prompt - 1))  # step 1 (with the retrieved page) no longer fits
    extra = outputs[0].extra_fields
    assert extra["episode_status"] == "failed" and "prompt length" in extra["episode_error"]
    assert [o.extra_fields["turn"] for o in outputs] == [0]
    assert all(len(o.prompt_ids) <= first_prompt - 1 for o in outputs)
    assert all(len(c["prompt_ids"]) <= first_prompt - 1 for c in double.calls)


@pytest.fixture(scope="module")
def transfer_queue():
    """A local Ray and TransferQueue (one storage unit), as tests/integration/test_verl_v1_path.py starts them."""
    import os

    pytest.importorskip("transfer_queue")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray
    import transfer_queue as tq
    from omegaconf import OmegaConf

    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=4, include_dashboard=False, logging_level="ERROR")
    tq.init(OmegaConf.create({"backend": {"SimpleStorage": {"num_data_storage_units": 1}}}))
    yield tq
    tq.close()
    if started:
        ray.shutdown()


@pytest.mark.slow  # a local Ray with TransferQueue's actors
def test_verls_v1_worker_stores_every_step_and_its_trainer_normalises_over_trajectories(
        tiny_qwen25vl_dir, processor, row, text_search_server, transfer_queue):
    """verl's own v1 path end to end: `AgentLoopWorkerTQ` (in-process) runs 2 sessions of vimrag_agent and puts
    each step as its own row `{uid}_{session}_{index}` into TransferQueue; the v1 trainer's `_compute_advantage`
    (GRPO on each session's final row, broadcast) gives every kept step its trajectory's advantage."""
    import uuid

    from transfer_queue import KVBatchMeta
    from transformers import AutoModelForImageTextToText
    from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopWorkerTQ
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync
    from verl.utils import tensordict_utils as tu
    from verl.utils.dataset.rl_dataset import collate_fn

    import vrag_rl.training.verl_plugins.register  # noqa: F401
    from testkit.verl_doubles import VLLMServerDouble, loopback_llm_client

    cfg = _compose([f"vrag.search.url={text_search_server.url}", *OVERRIDES,
                    f"actor_rollout_ref.model.path={tiny_qwen25vl_dir}", "actor_rollout_ref.rollout.n=2"])
    model = AutoModelForImageTextToText.from_pretrained(tiny_qwen25vl_dir).eval()
    server = VLLMServerDouble(model, processor, SUCCESS)
    client = loopback_llm_client(cfg, server)
    acquire, first = client._acquire_server, []

    async def scripted_acquire(request_id, **extra):  # the first episode to ask fails, the other succeeds
        if not first:
            first.append(request_id)
            server.scripts[request_id] = list(FAILURE)
        return await acquire(request_id, **extra)

    client._acquire_server = scripted_acquire
    worker = AgentLoopWorkerTQ.__ray_actor_class__(cfg, llm_client=client)
    uid = uuid.uuid4().hex
    item = {k: v for k, v in row.items() if k != "uid"}
    batch_dict = collate_fn([{**item, "agent_name": "vimrag_agent", "dummy_tensor": torch.zeros(1, dtype=torch.uint8)}])
    batch_dict["uid"] = np.array([uid], dtype=object)
    batch = tu.get_tensordict(batch_dict)
    tu.assign_non_tensor_data(batch, "global_steps", 1)
    transfer_queue.kv_batch_put(keys=[uid], partition_id="train",
                                tags=[{"is_prompt": True, "status": "pending", "global_steps": 1}])

    async def dispatch_and_wait():
        await worker.generate_sequences(batch)
        await asyncio.gather(*list(worker.background_tasks))

    asyncio.run(dispatch_and_wait())
    listing = transfer_queue.kv_list(partition_id="train")["train"]
    assert listing[uid]["status"] == "finished"
    keys = sorted(k for k in listing if k.startswith(f"{uid}_"))
    sessions = {k.rsplit("_", 2)[1] for k in keys}
    assert len(keys) == 8 and len(sessions) == 2  # 5 steps + 3 steps, one row each
    stored = transfer_queue.kv_batch_get(keys=keys, partition_id="train", select_fields=["rm_scores", "extra_fields"])
    extras = [getattr(e, "data", e) for e in stored["extra_fields"]]
    rewards = {k.rsplit("_", 2)[1]: float(s.sum()) for k, s in zip(keys, stored["rm_scores"].unbind(0))}
    assert sorted(rewards.values()) == pytest.approx([0.3, 1.0])

    # what the actor's log-prob pass writes before the advantage (on-policy: the rollout's own logprobs)
    from verl.utils.tensordict_utils import list_of_dict_to_tensordict

    logprobs = transfer_queue.kv_batch_get(keys=keys, partition_id="train", select_fields=["rollout_log_probs"])
    transfer_queue.kv_batch_put(keys=keys, partition_id="train", fields=list_of_dict_to_tensordict(
        [{"old_log_probs": lp} for lp in logprobs["rollout_log_probs"].unbind(0)]))
    trainer = object.__new__(PPOTrainerSync)
    trainer.config = cfg
    PPOTrainerSync._compute_advantage(trainer, KVBatchMeta(partition_id="train", keys=keys,
                                                           tags=[listing[k] for k in keys]), {})
    got = transfer_queue.kv_batch_get(keys=keys, partition_id="train", select_fields=["advantages", "response_mask"])
    for key, extra, adv, mask in zip(keys, extras, got["advantages"].unbind(0), got["response_mask"].unbind(0)):
        values = torch.unique(adv[mask.bool()]).tolist()
        if extra["ggpo_dropped"]:
            assert values == []
        else:
            sign = 1.0 if rewards[key.rsplit("_", 2)[1]] == pytest.approx(1.0) else -1.0
            assert values == pytest.approx([sign * 0.7071], abs=1e-3), (key, extra["turn"])
