"""The plugins against the installed verl, on CPU: registration, and one DataProto batch built from our
parquet flowing through our reward (in verl's own reward manager), GRPO (equal to verl's), GGPO (verl's
`compute_advantage` dispatching to our registered estimator over the pruned mask) and verl's own
policy-loss functions — pruned turns and observations get exactly zero gradient.

Six trajectories of two questions (three each), with hand-computed rewards:
  A1 search→doc_2, answer 42 (right)        0.7 + 0.1 + 0.2·1            = 1.0
  A2 search→doc_3, search→doc_2, answer 42   0.7 + 0.1 + 0.2·(1/log2 3)   ≈ 0.926   GGPO prunes turn 0 (dead end)
  A3 search→doc_3, answer 17 (wrong)         0.1                                    nothing pruned
  B1 search→memo_1, answer 7 (wrong)         0.1 + 0.2·1                  = 0.3     GGPO prunes turn 0 (found evidence)
  B2 one malformed reply, no answer          0 (format failed)
  B3 search→memo_1, answer 0.42 dollars      1.0
"""
from __future__ import annotations

import asyncio
import math
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("verl")

import torch  # noqa: E402

from vrag_rl.agent.credit_graph import CreditGraph, GraphNode  # noqa: E402
from vrag_rl.agent.result import TurnRecord  # noqa: E402
from vrag_rl.training.data import convert_records, write_parquet  # noqa: E402
from vrag_rl.training.rewards import RewardBreakdown  # noqa: E402
from vrag_rl.vrag.result import EpisodeResult

REPO = Path(__file__).resolve().parents[2]
RECORDS = [
    {"uid": "A", "query": "What is the answer in the report?", "reference_answer": "42",
     "meta_info": {"file_name": "doc.pdf", "reference_page": [2]}},
    {"uid": "B", "query": "What dividend did the memo approve?", "reference_answer": "0.42 dollars",
     "meta_info": {"file_name": "memo.pdf", "reference_page": [1]}},
]
# per trajectory: (steps as (action, shown page or None, parent step), answer or None)
EPISODES = {
    "A1": ([("search", "doc_2", None)], "42"),
    "A2": ([("search", "doc_3", None), ("search", "doc_2", None)], "42"),
    "A3": ([("search", "doc_3", None)], "17"),
    "B1": ([("search", "memo_1", None)], "7"),
    "B2": ([("invalid", None, None)], None),
    "B3": ([("search", "memo_1", None)], "0.42 dollars"),
}
EXPECTED = {"A1": 1.0, "A2": 0.8 + 0.2 / math.log2(3), "A3": 0.1, "B1": 0.3, "B2": 0.0, "B3": 1.0}
PRUNED = {"A2": [0], "B1": [0]}
TURN, OBS, PROMPT, RESPONSE = 4, 3, 8, 40  # tokens per model turn / observation; padded lengths


def _episode(name: str) -> tuple[EpisodeResult, list[tuple[int, int]]]:
    """A finished episode as the agent records it, and its model-turn spans in the response."""
    steps, answer = EPISODES[name]
    records, nodes, shown = [], [], []
    for i, (action, page, _) in enumerate(steps):
        records.append(TurnRecord(index=i, action=action, reply=f"<{action}>", valid=action != "invalid",
                                  retrieved=[[page, "other_9"]] if page else [],
                                  shown_image_ids=[f"img-{i}"] if page else []))
        nodes.append(GraphNode(f"t{i}", ("root",), action, (i,), (page,) if page else ()))
        if page:
            shown.append(page)
    answer_id = None
    if answer is not None:
        i = len(steps)
        records.append(TurnRecord(index=i, action="answer", reply=f"<answer>{answer}</answer>", valid=True))
        answer_id = f"t{i}"
        nodes.append(GraphNode(answer_id, (f"t{i - 1}",), "answer", (i,), ()))  # builds on the last image's step
    result = EpisodeResult(episode_id=name, question="q", answer=answer, status="answered" if answer else "failed",
                           evidence=[{"page_id": p} for p in shown], events=[], messages=[], images=[],
                           turns=len(records), elapsed_s=0.0, turn_records=records,
                           credit_graph=CreditGraph.build(nodes, answer_id))
    spans = [(k * (TURN + OBS), k * (TURN + OBS) + TURN) for k in range(len(records))]
    return result, spans


@pytest.fixture(scope="module")
def composed(tiny_qwen25vl_dir):
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    with initialize_config_dir(config_dir=str(REPO / "configs" / "verl"), version_base=None):
        cfg = compose(config_name="ggpo_qwen2_5_vl_7b", overrides=[
            f"actor_rollout_ref.model.path={tiny_qwen25vl_dir}",
            f"reward.custom_reward_function.path={REPO / 'vrag_rl' / 'training' / 'verl_plugins' / 'reward.py'}"])
    OmegaConf.resolve(cfg)
    return cfg


def test_plugins_register_against_the_installed_verl(composed):
    from verl.experimental.agent_loop.agent_loop import AgentLoopBase, _agent_loop_registry
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn
    from verl.trainer.ppo.reward import get_custom_reward_fn
    from verl.utils.config import omega_conf_to_dataclass

    model_config = omega_conf_to_dataclass(composed.actor_rollout_ref.model)  # imports external_lib, as workers do
    assert model_config.external_lib == "vrag_rl.training.verl_plugins.register"
    from vrag_rl.training.verl_plugins.advantage import compute_ggpo_advantage
    from vrag_rl.vrag.verl_agent_loop import VRAGAgentLoop

    assert _agent_loop_registry["vrag_agent"] == {"_target_": "vrag_rl.vrag.verl_agent_loop.VRAGAgentLoop"}
    assert issubclass(VRAGAgentLoop, AgentLoopBase)
    assert get_adv_estimator_fn("ggpo") is compute_ggpo_advantage
    loaded = get_custom_reward_fn(composed)  # verl's own loader, by file path
    assert loaded.args[0].__name__ == "compute_score" and asyncio.iscoroutinefunction(loaded.args[0])


@pytest.fixture(scope="module")
def batch(tmp_path_factory, tiny_qwen25vl_dir, composed):
    """Our parquet → verl's RLHFDataset → collate_fn → DataProto, repeated n=3 per question, plus rollouts."""
    from omegaconf import OmegaConf
    from transformers import AutoProcessor
    from verl import DataProto
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    from vrag_rl.training.verl_plugins.reward import episode_record
    from vrag_rl.training.verl_plugins.settings import plugin_settings

    rows, _ = convert_records(RECORDS, "unit")
    path = write_parquet(rows, tmp_path_factory.mktemp("rl") / "train.parquet")
    processor = AutoProcessor.from_pretrained(tiny_qwen25vl_dir)
    config = OmegaConf.create({"prompt_key": "prompt", "image_key": "images", "max_prompt_length": 1024,
                               "return_raw_chat": True, "dataloader_num_workers": 0, "truncation": "error",
                               "cache_dir": str(path.parent / "cache")})
    dataset = RLHFDataset(data_files=[str(path)], tokenizer=processor.tokenizer, config=config, processor=processor)
    data = DataProto.from_single_dict(collate_fn([dataset[0], dataset[1]]))
    data = data.repeat(repeat_times=3, interleave=True)
    names = list(EPISODES)
    data.non_tensor_batch["uid"] = np.array([n[0] for n in names], dtype=object)
    settings = plugin_settings(composed)
    gen = torch.Generator().manual_seed(0)
    responses = torch.randint(10, 500, (6, RESPONSE), generator=gen)
    attention = torch.zeros(6, PROMPT + RESPONSE, dtype=torch.long)
    mask = torch.zeros(6, RESPONSE, dtype=torch.long)
    extra, spans = [], {}
    for row, name in enumerate(names):
        result, turn_spans = _episode(name)
        spans[name] = turn_spans
        attention[row, :PROMPT] = 1
        attention[row, PROMPT:PROMPT + turn_spans[-1][1]] = 1
        for start, end in turn_spans:
            mask[row, start:end] = 1
        extra.append({"vrag_episode": episode_record(result, settings.reward, vars(settings.judge))})
    data.batch["prompts"] = torch.randint(10, 500, (6, PROMPT), generator=gen)
    data.batch["responses"] = responses
    data.batch["attention_mask"] = attention
    data.batch["response_mask"] = mask
    data.non_tensor_batch["tool_extra_fields"] = np.array(extra, dtype=object)
    return data, spans, processor


def _rewards(batch_data, composed, processor) -> list[dict]:
    """verl's own NaiveRewardManager (reward-loop path) calling our compute_score, per trajectory."""
    from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager
    from verl.trainer.ppo.reward import get_custom_reward_fn

    async def score_all():  # the manager binds the running event loop, as in verl's reward-loop worker
        manager = NaiveRewardManager(composed, processor.tokenizer, get_custom_reward_fn(composed))
        return [await manager.run_single(batch_data[i:i + 1]) for i in range(len(batch_data))]

    return asyncio.run(score_all())


def _token_level(data, scores: list[float]) -> torch.Tensor:
    rewards = torch.zeros_like(data.batch["responses"], dtype=torch.float32)
    lengths = data.batch["attention_mask"][:, PROMPT:].sum(-1)
    rewards[torch.arange(len(scores)), lengths - 1] = torch.tensor(scores)
    return rewards


def test_reward_grpo_ggpo_and_verls_policy_loss_on_one_batch(batch, composed):
    from verl.trainer.config import AlgoConfig
    from verl.trainer.ppo.core_algos import AdvantageEstimator, get_policy_loss_fn
    from verl.trainer.ppo.ray_trainer import compute_advantage
    from verl.workers.config.actor import ActorConfig

    from vrag_rl.training.algos import AlgorithmSettings, grpo_advantages
    from vrag_rl.training.rollout import Trajectory
    from vrag_rl.training.verl_plugins.reward import episode_from_record, reference_from_extra_info

    data, spans, processor = batch
    names = list(EPISODES)

    # 1. reward: verl's reward manager → our compute_score → the hand values
    scored = _rewards(data, composed, processor)
    scores = [out["reward_score"] for out in scored]
    assert scores == pytest.approx([EXPECTED[n] for n in names], abs=1e-6)
    data.batch["token_level_rewards"] = _token_level(data, scores)

    # 2. GRPO: verl's estimator == ours, broadcast over the response mask
    grpo = compute_advantage(data, AdvantageEstimator.GRPO, norm_adv_by_std_in_grpo=True)
    ours = grpo_advantages(torch.tensor(scores), list(data.non_tensor_batch["uid"])).unsqueeze(-1)
    torch.testing.assert_close(grpo.batch["advantages"], ours * data.batch["response_mask"], atol=1e-6, rtol=0)
    grpo_adv = grpo.batch["advantages"].clone()

    # 3. GGPO: the loop's prune decision zeroes turns in the mask; verl dispatches "ggpo" to our estimator
    ggpo_mask = data.batch["response_mask"].clone()
    for row, name in enumerate(names):
        extra = {**data.non_tensor_batch["extra_info"][row], **data.non_tensor_batch["tool_extra_fields"][row]}
        result = episode_from_record(extra["vrag_episode"])
        trajectory = Trajectory(group_id=name[0], index=row, prompt_ids=[], response_ids=[], response_mask=[],
                                response_logprobs=[], turn_spans=spans[name], images=[], result=result)
        info = scored[row]["reward_extra_info"]  # the parts compute_score returned, logged by verl
        assert info["outcome"] == (1.0 if name in ("A1", "A2", "B3") else 0.0), name
        breakdown = RewardBreakdown(info["score"], info["outcome"], info["format"], info["retrieval"])
        pruned = trajectory.pruned_turns(AlgorithmSettings("ggpo"), breakdown.outcome,
                                         reference_from_extra_info(extra).reference_pages)
        assert pruned == PRUNED.get(name, []), name
        for turn in pruned:
            ggpo_mask[row, spans[name][turn][0]:spans[name][turn][1]] = 0
    ggpo_data = data.select(deepcopy=True)
    ggpo_data.batch["response_mask"] = ggpo_mask
    algo = AlgoConfig(adv_estimator="ggpo", norm_adv_by_std_in_grpo=True)
    ggpo = compute_advantage(ggpo_data, "ggpo", config=algo).batch["advantages"]
    torch.testing.assert_close(ggpo, grpo_adv * ggpo_mask, atol=1e-6, rtol=0)
    a2 = names.index("A2")
    assert ggpo[a2, :TURN].abs().sum() == 0 and ggpo[a2, TURN + OBS:2 * TURN + OBS].abs().sum() > 0

    # 4. verl's own policy losses (GRPO: vanilla PPO-clip; GGPO config: GSPO) over these masks
    actor = ActorConfig(strategy="fsdp", ppo_micro_batch_size_per_gpu=1, use_dynamic_bsz=False, rollout_n=3,
                        clip_ratio_low=3e-4, clip_ratio_high=4e-4)
    old = -torch.rand(6, RESPONSE, generator=torch.Generator().manual_seed(1)) - 0.1
    for mode, advantages, loss_mask, agg in (("vanilla", grpo_adv, data.batch["response_mask"], "token-mean"),
                                             ("gspo", ggpo, ggpo_mask, "seq-mean-token-mean")):
        delta = torch.zeros(6, RESPONSE, requires_grad=True)
        loss, _metrics = get_policy_loss_fn(mode)(old_log_prob=old, log_prob=old + delta, advantages=advantages,
                                                 response_mask=loss_mask.float(), loss_agg_mode=agg, config=actor)
        loss.backward()
        grad = delta.grad
        assert torch.isfinite(loss) and grad[loss_mask == 0].abs().sum() == 0, mode  # observations, pruned turns
        nonzero_rows = [r for r in range(6) if advantages[r].abs().sum() > 0]
        assert all(grad[r][loss_mask[r] == 1].abs().sum() > 0 for r in nonzero_rows), mode


def test_settings_read_only_their_sections_of_the_trainer_config():
    """An agent loop per trajectory reads its settings: only the sections it needs are converted, and they
    equal what converting the whole config gives (interpolations resolved, missing paths left out)."""
    from omegaconf import OmegaConf

    from vrag_rl.training.verl_plugins.settings import plain_config, plain_sections

    cfg = OmegaConf.create({"data": {"len": 8, "twice": "${data.len}"}, "vrag": {"search": {"url": "http://h:1"}},
                            "actor_rollout_ref": {"rollout": {"n": 4, "big": list(range(100))}}})
    got = plain_sections(cfg, ["vrag", "data", "actor_rollout_ref.rollout.n", "absent.key"])
    whole = plain_config(cfg)
    assert got == {"vrag": whole["vrag"], "data": {"len": 8, "twice": 8}, "actor_rollout_ref": {"rollout": {"n": 4}}}
    assert plain_sections(whole, ["data.twice"]) == {"data": {"twice": 8}}  # a plain dict config reads the same
