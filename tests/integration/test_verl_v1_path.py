"""The `vrag_agent` plugin under verl 0.9.1's v1 trainer path (`trainer.use_v1: true`, verl's default).

Real: verl's v1 agent-loop worker (`AgentLoopWorkerTQ`, in-process instead of a Ray actor) from
`generate_sequences` through its post-processing into a real TransferQueue (controller and storage as
Ray actors on a local Ray), verl's `LLMServerClient.generate` (it sets `min_global_steps` /
`max_global_steps` on every output), our plugin, the search API on loopback, and the v1 trainer's
`_compute_metrics`, which reads those tags back (`np.array([...], dtype=int)`) — the line that failed
with `int(None)` at the end of step 1 before the plugin passed the fields on.
Double: the vLLM rollout server actor behind the client (`testkit.verl_doubles.VLLMServerDouble`).

Also here: an episode with no model token (its first reply held `<|image_pad|>`, or its first request
was aborted) still lands in TransferQueue as a valid, fully masked, zero-reward trajectory with the
same tags, and its question's group is "finished", not dropped.
"""
from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

import pytest

pytest.importorskip("verl")
pytest.importorskip("transfer_queue")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from testkit.verl_doubles import VLLMServerDouble, loopback_llm_client  # noqa: E402

pytestmark = pytest.mark.slow  # a local Ray with TransferQueue's actors (~25 s on 2 cores)

REPLIES = [
    "<think>I should search for the revenue.</think><search>Acme Robotics total revenue 2023</search>",
    "<think>zoom</think><bbox>[0, 0, 20, 20]</bbox>",
    "<think>The table says it.</think><answer>$341 million</answer>",
]
CONFIG_DIR = Path(__file__).resolve().parents[2] / "configs" / "verl"
WEIGHTS_VERSION = 6  # the rollout server's global_steps (weights loaded after step 6)
TRAINER_STEP = 7  # the step whose prompts these are


@pytest.fixture(scope="module")
def transfer_queue():
    """A local Ray and TransferQueue (one storage unit: its actors reserve one CPU each)."""
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray
    import transfer_queue as tq
    from omegaconf import OmegaConf

    if ray.is_initialized() and ray.cluster_resources().get("CPU", 0) < 3:
        ray.shutdown()  # a Ray left by another test is too small for TransferQueue's three actors
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=4, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    tq.init(OmegaConf.create({"backend": {"SimpleStorage": {"num_data_storage_units": 1}}}))
    yield tq
    tq.close()
    if started:
        ray.shutdown()


@pytest.fixture(scope="module")
def tiny(tiny_qwen25vl_dir):
    from transformers import AutoModelForImageTextToText, AutoProcessor

    return AutoModelForImageTextToText.from_pretrained(tiny_qwen25vl_dir).eval(), \
        AutoProcessor.from_pretrained(tiny_qwen25vl_dir)


@pytest.fixture(scope="module")
def item(tmp_path_factory, sample_corpus, tiny):
    """The revenue question of the sample corpus, as verl's RLHFDataset yields it from our parquet."""
    from omegaconf import OmegaConf
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from vrag_rl.training.data import convert_file, write_parquet

    rows, _ = convert_file(sample_corpus.dataset_path, data_source="sample")
    path = write_parquet(rows[:1], tmp_path_factory.mktemp("rl") / "train.parquet")
    config = OmegaConf.create({"prompt_key": "prompt", "image_key": "images", "max_prompt_length": 1024,
                               "return_raw_chat": True, "dataloader_num_workers": 0, "truncation": "error",
                               "cache_dir": str(path.parent / "cache")})
    return RLHFDataset(data_files=[str(path)], tokenizer=tiny[1].tokenizer, config=config, processor=tiny[1])[0]


def _config(tiny_dir, search_url: str, n: int):
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        cfg = compose(config_name="grpo_qwen2_5_vl_7b", overrides=[
            f"vrag.search.url={search_url}", "data.max_prompt_length=1024", "data.max_response_length=2048",
            "actor_rollout_ref.rollout.max_model_len=3072", "vrag.agent.max_tokens=64",
            "vrag.agent.min_pixels=3136", "vrag.agent.max_pixels=12544", f"actor_rollout_ref.model.path={tiny_dir}",
            f"actor_rollout_ref.rollout.n={n}"])
    OmegaConf.resolve(cfg)
    assert cfg.trainer.use_v1  # verl's default, kept by our configs
    return cfg


def _run_v1_step(tq, cfg, client, item) -> tuple[str, dict]:
    """What the v1 trainer does for one prompt: register it, dispatch it to the v1 worker, wait for the rollouts."""
    from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopWorkerTQ
    from verl.utils import tensordict_utils as tu
    from verl.utils.dataset.rl_dataset import collate_fn

    import vrag_rl.training.verl_plugins.register  # noqa: F401  (what external_lib does in verl's workers)

    worker = AgentLoopWorkerTQ.__ray_actor_class__(cfg, llm_client=client)  # the actor's class, in-process
    uid = uuid.uuid4().hex
    batch_dict = collate_fn([{**item, "dummy_tensor": torch.zeros(1, dtype=torch.uint8)}])
    batch_dict["uid"] = np.array([uid], dtype=object)  # PPOTrainer._fetch_one_gen_batch
    batch = tu.get_tensordict(batch_dict)
    tu.assign_non_tensor_data(batch, "global_steps", TRAINER_STEP)  # PPOTrainer._next_train_batch
    tq.kv_batch_put(keys=[uid], partition_id="train",  # PPOTrainer._submit_batch_to_rollout
                    tags=[{"is_prompt": True, "status": "pending", "global_steps": TRAINER_STEP}])

    async def dispatch_and_wait():
        await worker.generate_sequences(batch)
        await asyncio.gather(*list(worker.background_tasks))

    asyncio.run(dispatch_and_wait())
    return uid, tq.kv_list(partition_id="train")["train"]


def _trainer_metrics(tq, cfg, uid: str, listing: dict) -> dict:
    """verl's v1 `PPOTrainer._compute_metrics` over this prompt's trajectories, as after the actor update."""
    from transfer_queue import KVBatchMeta
    from verl.trainer.ppo.metric_utils import RolloutMoELoadBalanceMetricsAccumulator
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync
    from verl.utils.tensordict_utils import list_of_dict_to_tensordict

    keys = sorted(k for k in listing if k.startswith(f"{uid}_"))
    rm = tq.kv_batch_get(keys=keys, partition_id="train", select_fields=["rm_scores"])
    fields = []  # what the trainer writes back before its metrics: rewards, advantages, returns
    for scores in rm["rm_scores"].unbind(0):
        fields.append({"token_level_rewards": scores, "advantages": torch.zeros_like(scores, dtype=torch.float32),
                       "returns": torch.zeros_like(scores, dtype=torch.float32)})
    tq.kv_batch_put(keys=keys, partition_id="train", fields=list_of_dict_to_tensordict(fields))
    batch = KVBatchMeta(partition_id="train", keys=keys, tags=[listing[k] for k in keys])

    trainer = object.__new__(PPOTrainerSync)  # the sync v1 trainer; _compute_metrics reads only these attributes
    trainer.config, trainer.use_critic = cfg, False
    trainer._rollout_moe_lb_metrics_accumulator = RolloutMoELoadBalanceMetricsAccumulator()
    trainer._get_n_gpus_for_throughput = lambda: 1
    metrics: dict = {}
    PPOTrainerSync._compute_metrics(trainer, batch, metrics, {"step": 1.0, "gen": 0.5}, global_steps=TRAINER_STEP,
                                epoch=0)
    return metrics


def test_v1_worker_puts_complete_trajectories_and_the_trainer_reads_their_tags(tiny, tiny_qwen25vl_dir, item,
                                                                               text_search_server, transfer_queue):
    model, processor = tiny
    cfg = _config(tiny_qwen25vl_dir, text_search_server.url, n=2)
    server = VLLMServerDouble(model, processor, REPLIES, global_steps=WEIGHTS_VERSION)
    uid, listing = _run_v1_step(transfer_queue, cfg, loopback_llm_client(cfg, server), item)
    # first what crashed at the end of step 1: the v1 trainer's metrics read the weight-version tags as ints
    metrics = _trainer_metrics(transfer_queue, cfg, uid, listing)
    assert metrics["training/off_policy/trajectory_spans/mean"] == 1  # one weights version per trajectory
    assert metrics["training/off_policy/trajectory_staleness/mean"] == TRAINER_STEP - 1 - WEIGHTS_VERSION == 0

    assert listing[uid]["status"] == "finished"  # every session settled without an error
    keys = sorted(k for k in listing if k.startswith(f"{uid}_"))
    assert keys == [f"{uid}_0_0", f"{uid}_1_0"]
    for key in keys:
        tag = listing[key]
        assert tag["status"] == "success" and tag["global_steps"] == TRAINER_STEP
        assert tag["min_global_steps"] == tag["max_global_steps"] == WEIGHTS_VERSION  # from LLMServerClient
    assert len(server.calls) == 6 and all(c["sampling_params"]["logit_bias"] for c in server.calls)

    stored = transfer_queue.kv_batch_get(keys=keys, partition_id="train",
                                         select_fields=["rm_scores", "response_mask", "extra_fields"])
    assert [float(s.sum()) for s in stored["rm_scores"].unbind(0)] == pytest.approx([1.0, 1.0])
    extra = stored["extra_fields"][0]
    extra = getattr(extra, "data", extra)
    assert extra["episode_status"] == "answered" and extra["num_cached_tokens"] == 0


@pytest.mark.parametrize("first_reply", ["<|image_pad|>", None], ids=["vision-token", "aborted"])
def test_a_session_with_no_model_token_is_a_masked_zero_reward_member_of_its_group(
        first_reply, tiny, tiny_qwen25vl_dir, item, text_search_server, transfer_queue):
    """Session 0's first reply holds <|image_pad|> (rejected) or its first request is aborted: the episode
    fails with no model token; the output is one masked token, reward 0; session 1 is a full episode."""
    model, processor = tiny
    cfg = _config(tiny_qwen25vl_dir, text_search_server.url, n=2)
    tok = processor.tokenizer
    bad = None if first_reply is None else tok("<think>look</think>", add_special_tokens=False)["input_ids"] + \
        [tok.convert_tokens_to_ids(first_reply)]
    server = VLLMServerDouble(model, processor, REPLIES, global_steps=WEIGHTS_VERSION)
    client = loopback_llm_client(cfg, server)
    first_session: list[str] = []
    acquire = client._acquire_server

    async def scripted_acquire(request_id, **extra):  # the first episode to ask gets the bad first reply
        if not first_session:
            first_session.append(request_id)
            server.scripts[request_id] = [bad, *REPLIES]
        return await acquire(request_id, **extra)

    client._acquire_server = scripted_acquire
    uid, listing = _run_v1_step(transfer_queue, cfg, client, item)

    assert listing[uid]["status"] == "finished"  # the group survives
    keys = sorted(k for k in listing if k.startswith(f"{uid}_"))
    assert len(keys) == 2 and all(listing[k]["min_global_steps"] == WEIGHTS_VERSION for k in keys)
    stored = transfer_queue.kv_batch_get(keys=keys, partition_id="train",
                                         select_fields=["responses", "response_mask", "rm_scores", "extra_fields"])
    rows = list(zip(stored["responses"].unbind(0), stored["response_mask"].unbind(0),
                    stored["rm_scores"].unbind(0), stored["extra_fields"]))
    empty = [r for r in rows if int(r[1].sum()) == 0]
    full = [r for r in rows if int(r[1].sum()) > 0]
    assert len(empty) == 1 and len(full) == 1
    responses, mask, scores, extra = empty[0]
    extra = getattr(extra, "data", extra)
    assert responses.numel() == 1 and float(scores.sum()) == 0.0
    assert extra["episode_status"] == "failed" and extra["reward_extra_info"]["vrag/empty_response"] == 1.0
    reason = "vision special token <|image_pad|>" if first_reply else "aborted"
    assert reason in extra["episode_error"]
    assert float(full[0][2].sum()) == pytest.approx(1.0)
    assert set(extra["reward_extra_info"]) == set(getattr(full[0][3], "data", full[0][3])["reward_extra_info"])
    _trainer_metrics(transfer_queue, cfg, uid, listing)  # the trainer's metrics accept the masked member
