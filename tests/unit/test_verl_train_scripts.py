"""The cluster scripts: `--dry-run` composes the real verl command and config; a real run on a machine
without what it needs stops before starting anything and lists every missing piece."""
from __future__ import annotations

import importlib.util
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from vrag_rl.training.data import convert_records, write_parquet

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = {  # script -> (config, default model, GPUs per node)
    "train_grpo_qwen2_5_vl_7b.sh": ("grpo_qwen2_5_vl_7b", "Qwen/Qwen2.5-VL-7B-Instruct", 8),
    "train_ggpo_qwen2_5_vl_7b.sh": ("ggpo_qwen2_5_vl_7b", "Qwen/Qwen2.5-VL-7B-Instruct", 8),
    "train_ggpo_vimrag_qwen2_5_vl_7b.sh": ("ggpo_vimrag_qwen2_5_vl_7b", "Qwen/Qwen2.5-VL-7B-Instruct", 8),
    "train_grpo_qwen3_vl_8b.sh": ("grpo_qwen3_vl_8b", "Qwen/Qwen3-VL-8B-Instruct", 8),
    "train_ggpo_qwen3_vl_8b.sh": ("ggpo_qwen3_vl_8b", "Qwen/Qwen3-VL-8B-Instruct", 8),
    "train_grpo_qwen2_5_vl_3b_lora.sh": ("grpo_qwen2_5_vl_3b_lora_24gb", "Qwen/Qwen2.5-VL-3B-Instruct", 1),
}
RECORDS = [{"uid": "0", "query": "What was the revenue?", "reference_answer": "$341 million",
            "meta_info": {"file_name": "acme_annual_report_2023.pdf", "reference_page": [2]}}]


def test_every_train_script_is_covered():
    assert sorted(p.name for p in (REPO / "scripts").glob("train_*.sh") if p.name != "train_common.sh") == \
        sorted(SCRIPTS)


PYTHON = str(REPO / ".venv" / "bin" / "python") if (REPO / ".venv").exists() else "python3"


def _parquet_pair(tmp_path: Path, agent_name: str) -> dict[str, str]:
    rows, _ = convert_records(RECORDS, "sample", agent_name=agent_name)
    return {"TRAIN_FILE": str(write_parquet(rows, tmp_path / f"train_{agent_name}.parquet")),
            "VAL_FILE": str(write_parquet(rows, tmp_path / f"val_{agent_name}.parquet"))}


@pytest.fixture()
def env(tmp_path) -> dict[str, str]:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    return {**os.environ, **_parquet_pair(tmp_path, "vrag_agent"), "MODEL_PATH": str(model),
            "VRAG_SEARCH_URL": "http://10.1.2.3:8002", "CKPT_DIR": str(tmp_path / "ckpt"), "PYTHON": PYTHON}


def _script_env(script: str, env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """The VimRAG script trains rows converted with `--agent-name vimrag_agent`; the others the default rows."""
    return {**env, **_parquet_pair(tmp_path, "vimrag_agent")} if "vimrag" in script else env


def _run(script: str, args: list[str], env: dict[str, str], timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(REPO / "scripts" / script), *args], env=env, capture_output=True, text=True,
                          check=False, timeout=timeout, cwd=REPO)


def _composed_config(stdout: str) -> dict:
    text = stdout.split("[dry-run] composed config:\n", 1)[1]
    return yaml.safe_load("\n".join(line for line in text.splitlines() if not line.startswith("WARNING:")))


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_dry_run_prints_the_command_and_the_config_verl_would_run(script, env, tmp_path):
    """Each script composes its config through verl's own entry point (`--cfg job`, ~10 s of imports)."""
    env = _script_env(script, env, tmp_path)
    run_env = {**env, "NNODES": "2"} if script == "train_ggpo_qwen3_vl_8b.sh" else env
    proc = _run(script, ["--dry-run", "trainer.total_epochs=3"], run_env, timeout=400)
    assert proc.returncode == 0, f"{script}: {proc.stderr[-3000:]}"
    _check_dry_run(script, proc.stdout, env)
    failed = [line for line in proc.stderr.splitlines() if line.startswith("[check] FAIL")]
    assert all("GPU" in line or "no search server answers" in line for line in failed), failed  # none else here


def _check_dry_run(script: str, out: str, env: dict[str, str], defaults: bool = True) -> None:
    config_name, _model, gpus = SCRIPTS[script]
    multi_node = script == "train_ggpo_qwen3_vl_8b.sh"
    command = next(line for line in out.splitlines() if line.startswith("[train] command:"))
    assert "-m verl.trainer.main_ppo" in command and f"--config-name={config_name}" in command
    assert f"actor_rollout_ref.model.path={env['MODEL_PATH']}" in command and "trainer.total_epochs=3" in command
    cfg = _composed_config(out)
    assert cfg["actor_rollout_ref"]["model"]["path"] == env["MODEL_PATH"]
    assert cfg["data"]["train_files"] == env["TRAIN_FILE"] and cfg["data"]["val_files"] == env["VAL_FILE"]
    assert cfg["vrag"]["search"]["url"] == "http://10.1.2.3:8002"
    assert cfg["trainer"]["n_gpus_per_node"] == gpus and cfg["trainer"]["total_epochs"] == 3
    assert cfg["trainer"]["experiment_name"] == config_name and cfg["trainer"]["default_local_dir"] == env["CKPT_DIR"]
    vimrag = "vimrag" in config_name  # one row per step: verl's grpo estimator (v1 trainer) for GRPO and GGPO
    assert cfg["algorithm"]["adv_estimator"] == ("grpo" if vimrag else config_name.split("_")[0])
    assert cfg["vrag"]["algorithm"] == config_name.split("_")[0]
    assert cfg["actor_rollout_ref"]["rollout"]["agent"]["default_agent_loop"] == \
        ("vimrag_agent" if vimrag else "vrag_agent")
    if vimrag:
        assert cfg["trainer"]["use_v1"] and cfg["vimrag"]["agent"]["max_turns"] >= 1
    reward_file = REPO / "vrag_rl" / "training" / "verl_plugins" / "reward.py"
    assert cfg["reward"]["custom_reward_function"]["path"] == str(reward_file)
    assert out.count("rows OK") == 2, script  # both parquet files were checked
    loop = "vimrag_agent" if vimrag else "vrag_agent"
    assert out.count(f"agent_name {loop}") == 2, script  # ... against the loop this script trains
    # verl's actor defaults to flash_attention_2; without flash-attn the command picks sdpa (and turns off
    # remove-padding, whose Qwen2-VL patch calls flash-attn's varlen kernel) and the preflight says which
    model = cfg["actor_rollout_ref"]["model"]
    if importlib.util.find_spec("flash_attn") is None:
        assert model["override_config"]["attn_implementation"] == "sdpa" and model["use_remove_padding"] is False
        assert "attention: sdpa (flash-attn is not installed" in out
    else:
        assert model["override_config"]["attn_implementation"] == "flash_attention_2"
        assert "attention: flash_attention_2" in out
    if defaults:  # retention: a 7B checkpoint with optimiser state is ~84 GB; dumps: off unless asked for
        assert cfg["trainer"]["max_actor_ckpt_to_keep"] == 2
        assert cfg["trainer"]["rollout_data_dir"] is None and cfg["trainer"]["validation_data_dir"] is None
    if multi_node:
        assert cfg["trainer"]["nnodes"] == 2
        assert "[ray] would run: " in out and "ray start --head --port=6379 --num-gpus=8" in out
    else:
        assert "[ray] single node" in out, script


def test_real_run_stops_before_starting_anything_and_lists_every_missing_piece(tmp_path):
    env = {**os.environ, "TRAIN_FILE": str(tmp_path / "none.parquet"), "VAL_FILE": str(tmp_path / "none2.parquet"),
           "MODEL_PATH": str(tmp_path / "no-model"), "VRAG_SEARCH_URL": "http://127.0.0.1:9", "CKPT_DIR":
           str(tmp_path / "ckpt"), "PATH": os.environ["PATH"]}
    proc = _run("train_grpo_qwen2_5_vl_7b.sh", [], env, timeout=120)
    assert proc.returncode == 1
    err = proc.stderr
    assert "dataset not found" in err and str(tmp_path / "none2.parquet") in err
    assert f"model {tmp_path / 'no-model'} does not exist" in err
    assert "no search server answers at http://127.0.0.1:9/health" in err
    assert "NVIDIA GPU(s) but N_GPUS=8" in err or "lacks" in err
    assert "nothing was started" in err and not (tmp_path / "ckpt").exists()


def test_checks_accept_what_exists_and_flag_only_the_rest(env, tmp_path):
    index = tmp_path / "index"
    index.mkdir()
    (index / "manifest.json").write_text("{}")
    proc = _run("train_grpo_qwen2_5_vl_3b_lora.sh", [], {**env, "VRAG_INDEX": str(index)}, timeout=120)
    assert proc.returncode == 1
    assert "1 rows OK" in proc.stdout and f"ok: model {env['MODEL_PATH']}" in proc.stdout
    assert f"ok: search index {index}" in proc.stdout
    failures = [line for line in proc.stderr.splitlines() if line.startswith("[check] FAIL")]
    assert all("GPU" in line or "vllm" in line for line in failures) and failures


def _failures(proc: subprocess.CompletedProcess) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.startswith("[check] FAIL")]


@pytest.mark.parametrize(("script", "rows", "loop"), [
    ("train_ggpo_vimrag_qwen2_5_vl_7b.sh", "vrag_agent", "vimrag_agent"),
    ("train_grpo_qwen2_5_vl_7b.sh", "vimrag_agent", "vrag_agent"),
])
def test_a_script_refuses_rows_converted_for_another_agent(script, rows, loop, env, tmp_path):
    """verl runs each row's `agent_name`, whatever the config's loop: a VimRAG launch on VRAG rows would train the
    VRAG loop under VimRAG's settings. The check names the converter flag that makes the right rows."""
    proc = _run(script, [], {**env, **_parquet_pair(tmp_path, rows)}, timeout=120)
    assert proc.returncode == 1 and "nothing was started" in proc.stderr
    err = proc.stderr
    assert err.count(f"1 row(s) have agent_name {rows!r} but this run trains {loop!r}") == 2, err[-3000:]  # both files
    assert err.count(f"python -m vrag_rl.training.data convert QA.json --agent-name {loop} --out") >= 2
    assert len([line for line in _failures(proc) if "dataset" in line]) == 2


def _health_app():
    from fastapi import FastAPI

    app = FastAPI()

    @app.get("/health")
    def health() -> dict:
        return {"status": "ok"}

    return app


@pytest.mark.parametrize("url", ["http://127.0.0.1:{port}", "http://localhost:{port}/"])
def test_multi_node_refuses_a_loopback_search_url_even_when_the_head_reaches_it(url, env):
    """On the head a loopback URL answers; on every other node it reaches nothing, and the run trains on zero
    rewards. A multi-node launch refuses it before Ray starts, and says what to set instead."""
    from testkit.loopback import serve

    with serve(_health_app()) as server:
        search_url = url.format(port=server.port)
        proc = _run("train_grpo_qwen2_5_vl_7b.sh", [], {**env, "NNODES": "2", "VRAG_SEARCH_URL": search_url},
                    timeout=120)
    assert proc.returncode == 1 and "nothing was started" in proc.stderr
    assert f"ok: search server {search_url}" in proc.stdout  # the head's health check passes ...
    loopback = [line for line in _failures(proc) if "loopback" in line]
    assert len(loopback) == 1, proc.stderr[-3000:]  # ... and the launch is refused all the same
    assert f"NNODES=2 but VRAG_SEARCH_URL={search_url}" in loopback[0]
    assert "SEARCH_BIND=0.0.0.0 VRAG_SEARCH_URL=http://HEAD_IP:" in loopback[0]
    assert "[ray]" not in proc.stdout


def test_multi_node_refuses_a_search_server_it_would_bind_to_loopback(env, tmp_path):
    index = tmp_path / "index"
    index.mkdir()
    (index / "manifest.json").write_text("{}")
    proc = _run("train_grpo_qwen2_5_vl_7b.sh", [], {**env, "NNODES": "2", "VRAG_INDEX": str(index)}, timeout=120)
    assert proc.returncode == 1
    assert any("SEARCH_BIND=127.0.0.1" in line and "other nodes" in line for line in _failures(proc)), proc.stderr
    single = _run("train_grpo_qwen2_5_vl_7b.sh", [], {**env, "VRAG_INDEX": str(index),
                                                      "VRAG_SEARCH_URL": "http://127.0.0.1:8002"}, timeout=120)
    assert not [line for line in _failures(single) if "loopback" in line or "SEARCH_BIND" in line]  # one node: fine


def _sourced(body: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """train_common.sh's functions in a bash of their own (what a train_*.sh runs, without verl's compose)."""
    script = (f"VRAG_CONFIG_DEFAULT=grpo_qwen2_5_vl_7b MODEL_PATH_DEFAULT=m N_GPUS_DEFAULT=8; "
              f"source {REPO / 'scripts' / 'train_common.sh'}; {body}")
    return subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=120, check=False,
                          cwd=REPO)


def test_attention_is_flash_attn_where_it_imports_and_sdpa_otherwise(env, tmp_path):
    """verl defaults the actor to flash_attention_2, which `verl[vllm]` does not install: the script picks the
    attention implementation from what imports in PYTHON, and the preflight line says which."""
    body = ('_vrag_defaults; OVERRIDES=(); DRY_RUN=1; _vrag_attention; _vrag_command; printf "%s\n" "${CMD[@]}"; '
            'echo "NOTE=$ATTN_NOTE"')
    fake = tmp_path / "site"  # a stand-in flash_attn package: only its import and version are read
    (fake / "flash_attn").mkdir(parents=True)
    (fake / "flash_attn" / "__init__.py").write_text('__version__ = "2.8.3"\n')
    with_fa = _sourced(body, {**env, "PYTHONPATH": str(fake)})
    assert with_fa.returncode == 0, with_fa.stderr
    assert "++actor_rollout_ref.model.override_config.attn_implementation=flash_attention_2" in with_fa.stdout
    assert "use_remove_padding=false" not in with_fa.stdout
    assert "NOTE=flash_attention_2 (flash-attn 2.8.3)" in with_fa.stdout
    if importlib.util.find_spec("flash_attn") is None:
        without = _sourced(body, env)
        assert without.returncode == 0, without.stderr
        assert "++actor_rollout_ref.model.override_config.attn_implementation=sdpa" in without.stdout
        assert "actor_rollout_ref.model.use_remove_padding=false" in without.stdout
        assert "NOTE=sdpa (flash-attn is not installed" in without.stdout
        checks = _run("train_grpo_qwen2_5_vl_7b.sh", [], {**env, "ATTN_IMPL": "flash_attention_2"}, timeout=120)
        assert any("ATTN_IMPL=flash_attention_2 but flash_attn does not import" in line and "pip install flash-attn"
                   in line for line in _failures(checks)), checks.stderr
    bad = _sourced(body, {**env, "ATTN_IMPL": "flash"})
    assert bad.returncode != 0 and "ATTN_IMPL must be auto, flash_attention_2, sdpa or eager" in bad.stderr


def test_help_documents_the_launch_switches(env):
    proc = _run("train_grpo_qwen2_5_vl_7b.sh", ["--help"], env, timeout=60)
    assert proc.returncode == 0
    for needle in ("--dump", "DUMP_DIR", "trainer.rollout_data_dir", "trainer.validation_data_dir",
                   "log_val_generations", "ATTN_IMPL", "trainer.max_actor_ckpt_to_keep"):
        assert needle in proc.stdout, needle


def test_bad_arguments_and_join(env):
    proc = _run("train_grpo_qwen2_5_vl_7b.sh", ["--bogus"], env, timeout=60)
    assert proc.returncode == 2 and "unknown argument: --bogus" in proc.stderr and "usage:" in proc.stderr
    proc = _run("train_grpo_qwen2_5_vl_7b.sh", ["--dry-run", "--join", "10.0.0.1:6379"], env, timeout=60)
    assert proc.returncode == 0 and "[ray] would run: " in proc.stdout
    assert "ray start --address=10.0.0.1:6379 --num-gpus=8 --block" in proc.stdout
    proc = _run("train_grpo_qwen2_5_vl_7b.sh", ["--help"], env, timeout=60)
    assert proc.returncode == 0 and "VRAG_SEARCH_URL" in proc.stdout and "RESUME_MODE" in proc.stdout


@pytest.mark.slow
def test_the_script_starts_and_stops_a_search_server_on_an_index(text_index, tmp_path):
    """The part a dry run skips: `vrag-search serve` started on VRAG_INDEX, healthy, then stopped on exit."""
    from testkit.loopback import free_port

    port = free_port()
    env = {**os.environ, "VRAG_INDEX": str(text_index), "SEARCH_PORT": str(port), "CKPT_DIR": str(tmp_path),
           "VRAG_CONFIG_DEFAULT": "grpo_qwen2_5_vl_7b", "MODEL_PATH_DEFAULT": "m", "N_GPUS_DEFAULT": "1"}
    script = (f"source {REPO / 'scripts' / 'train_common.sh'}; _vrag_defaults; trap _cleanup EXIT; _start_search; "
              "_search_healthy && echo HEALTHY; echo PID=$SEARCH_PID")
    proc = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "HEALTHY" in proc.stdout and f"[search] healthy at http://127.0.0.1:{port}" in proc.stdout
    pid = int(proc.stdout.split("PID=")[1].split()[0])
    with pytest.raises(ProcessLookupError):  # the EXIT trap stopped the server the script started
        os.kill(pid, 0)
    assert (tmp_path / "search_server.log").exists()


@pytest.mark.slow
@pytest.mark.parametrize("use_v1", ["true", "false"])
def test_the_7b_script_composes_on_both_trainer_paths(use_v1, env, tmp_path):
    """verl's v1 trainer (TransferQueue; verl's default) and its v0 trainer: the same script and config; on both,
    `--dump` turns on verl's trajectory and validation dumps, and the checkpoint retention is overridable."""
    dumps = tmp_path / "dumps"
    proc = _run("train_grpo_qwen2_5_vl_7b.sh", ["--dry-run", "--dump", "trainer.total_epochs=3",
                                                f"trainer.use_v1={use_v1}", "trainer.max_actor_ckpt_to_keep=5"],
                {**env, "DUMP_DIR": str(dumps)}, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    _check_dry_run("train_grpo_qwen2_5_vl_7b.sh", proc.stdout, env, defaults=False)
    cfg = _composed_config(proc.stdout)
    assert cfg["trainer"]["use_v1"] is (use_v1 == "true")
    assert cfg["trainer"]["max_actor_ckpt_to_keep"] == 5
    assert cfg["trainer"]["rollout_data_dir"] == str(dumps / "rollout")
    assert cfg["trainer"]["validation_data_dir"] == str(dumps / "validation")
    assert cfg["trainer"]["log_val_generations"] == 10
    assert f"trajectory dumps: {dumps}" in proc.stdout
    from vrag_rl.training.verl_plugins.settings import plugin_settings

    assert plugin_settings(cfg).algorithm == "grpo"  # the plugin reads the composed config on both paths


@pytest.mark.slow
def test_gpu_smoke_dry_run_builds_its_data_and_index_and_composes_the_v1_run(tmp_path):
    """scripts/gpu_smoke.sh --dry-run: sample corpus → parquet → text index, every check, the composed config
    of two v1 GRPO steps on one GPU (the GPU check is the one expected failure here)."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    env = {**os.environ, "SMOKE_DIR": str(tmp_path / "smoke"), "MODEL_PATH": str(model),
           "PYTHON": str(REPO / ".venv" / "bin" / "python") if (REPO / ".venv").exists() else "python3"}
    proc = subprocess.run(["bash", str(REPO / "scripts" / "gpu_smoke.sh"), "--dry-run"], env=env, capture_output=True,
                          text=True, check=False, timeout=600, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert (tmp_path / "smoke" / "index" / "manifest.json").is_file()
    assert out.count("rows OK") == 2 and "[check] ok: search index" in out
    failed = [line for line in proc.stderr.splitlines() if line.startswith("[check] FAIL")]
    assert all("GPU" in line for line in failed), failed  # only the GPU is missing on a CPU machine
    command = next(line for line in out.splitlines() if line.startswith("[train] command:"))
    assert "--config-name=smoke_grpo_qwen2_5_vl_3b_1gpu" in command and "trainer.resume_mode=disable" in command
    cfg = _composed_config(out)
    assert cfg["trainer"]["use_v1"] is True and cfg["trainer"]["total_training_steps"] == 2
    assert cfg["trainer"]["n_gpus_per_node"] == 1 and cfg["actor_rollout_ref"]["rollout"]["name"] == "vllm"
    assert cfg["vrag"]["search"]["url"] == "http://127.0.0.1:8012"
    assert cfg["data"]["train_files"] == str(tmp_path / "smoke" / "data" / "train.parquet")
    assert cfg["trainer"]["default_local_dir"] == str(tmp_path / "smoke" / "checkpoints")


def test_cpu_mode_needs_a_config_with_the_hf_rollout_and_no_gpu(env, tmp_path):
    """TRAIN_DEVICE=cpu: no vLLM and no GPU are required, but the config must compose parts/cpu.yaml (rollout hf);
    a GPU config (rollout vllm) is refused before anything starts."""
    index = tmp_path / "index"
    index.mkdir()
    (index / "manifest.json").write_text("{}")
    cpu = {**env, "VRAG_INDEX": str(index), "TRAIN_DEVICE": "cpu"}
    proc = _run("train_grpo_qwen2_5_vl_7b.sh", [], cpu, timeout=180)
    assert proc.returncode == 1 and not (tmp_path / "ckpt").exists()
    failures = _failures(proc)
    assert any("rollout.name is 'vllm'" in f and "parts/cpu.yaml" in f for f in failures)
    assert not any("GPU(s)" in f for f in failures)  # no GPU is asked for in CPU mode
    proc = _run("train_grpo_qwen2_5_vl_7b.sh", ["--dry-run", "actor_rollout_ref.rollout.name=hf"], cpu, timeout=180)
    assert "ok: CPU mode" in proc.stdout and not _failures(proc)
    proc = _run("train_grpo_qwen2_5_vl_7b.sh", [], {**cpu, "TRAIN_DEVICE": "tpu"}, timeout=60)
    assert proc.returncode == 2 and "TRAIN_DEVICE must be cuda or cpu" in proc.stderr
