"""QA files → verl parquet: columns, page ids, every bad row reported, and verl's own dataset reads it."""
from __future__ import annotations

import json

import pytest

from vrag_rl.training.data import (
    DatasetConversionError,
    check_parquet,
    convert_file,
    convert_records,
    write_parquet,
)
from vrag_rl.training.data.__main__ import main as data_cli
from vrag_rl.vrag.prompts import Prompts

UPSTREAM = {"examples": [
    {"uid": "0", "query": "What share of Latinos say the economy is good?", "reference_answer": "25%",
     "meta_info": {"file_name": "PH_2016.06.08_Economy-Final.pdf", "reference_page": [5], "source_type": ["Chart"],
                   "doc_type": "Research report", "answer_format": "Str"}},
    {"uid": "2", "query": "What were Nestle's sales in 2011?", "reference_answer": "12.5 bn",
     "meta_info": {"file_name": "2012-02-20fy11roadshow-120221022442-phpapp02_95.pdf", "reference_page": [5, 7],
                   "query_type": "Multi-Hop_Single-Span"}},
]}


def test_upstream_rows_have_the_columns_verl_and_the_plugins_read(tmp_path):
    src = tmp_path / "slidevqa.json"
    src.write_text(json.dumps(UPSTREAM))
    rows, report = convert_file(src, data_source="slidevqa_train")
    assert report.rows == 2 and not report.skipped
    first, second = rows
    assert first["data_source"] == "slidevqa_train" and first["agent_name"] == "vrag_agent"
    assert first["prompt"] == Prompts().initial_messages(UPSTREAM["examples"][0]["query"])
    assert first["images"] == [] and first["reward_model"] == {"style": "model", "ground_truth": "25%"}
    extra = first["extra_info"]
    assert extra["reference_page_ids"] == ["PH_2016.06.08_Economy-Final_5"]
    assert extra["reference_page"] == [5] and extra["content_type"] == "Chart"
    assert json.loads(extra["meta_json"]) == {"answer_format": "Str", "doc_type": "Research report",
                                              "source_type": ["Chart"]}
    assert second["extra_info"]["reference_page_ids"] == [
        "2012-02-20fy11roadshow-120221022442-phpapp02_95_5", "2012-02-20fy11roadshow-120221022442-phpapp02_95_7"]
    assert second["extra_info"]["reason_type"] == "Multi-Hop_Single-Span"
    assert [r["extra_info"]["index"] for r in rows] == [0, 1]


def test_every_bad_row_is_reported_and_nothing_is_dropped_silently():
    records = [
        {"query": "ok?", "reference_answer": "yes", "meta_info": {"file_name": "a.pdf", "reference_page": [1]}},
        {"query": "", "reference_answer": "x", "meta_info": {"file_name": "a.pdf", "reference_page": [1]}},
        {"query": "no answer", "meta_info": {"file_name": "a.pdf", "reference_page": [1]}},
        {"query": "page 0", "reference_answer": "x", "meta_info": {"file_name": "a.pdf", "reference_page": [0]}},
        {"query": "no pages", "reference_answer": "x"},
        "not an object",
    ]
    with pytest.raises(DatasetConversionError) as err:
        convert_records(records, "vidoseek")
    assert len(err.value.errors) == 5
    text = str(err.value)
    for needle in ("example 1", "example 2", "example 3", "1-based", "example 4: no reference_page", "example 5"):
        assert needle in text
    rows, report = convert_records(records, "vidoseek", skip_bad=True)
    assert len(rows) == 1 and len(report.skipped) == 5
    rows, _ = convert_records(records[4:5], "vidoseek", require_pages=False)
    assert rows[0]["extra_info"]["reference_page_ids"] == []


def test_duplicate_uids_and_empty_source_are_errors():
    rec = {"uid": "7", "query": "q", "reference_answer": "a", "meta_info": {"file_name": "a.pdf", "reference_page": 2}}
    with pytest.raises(DatasetConversionError, match="duplicate uid '7'"):
        convert_records([rec, rec], "x")
    with pytest.raises(ValueError, match="data_source"):
        convert_records([rec], " ")


def test_project_sample_dataset_roundtrips_through_parquet_and_cli(tmp_path, sample_corpus):
    out = tmp_path / "train.parquet"
    assert data_cli(["convert", str(sample_corpus.dataset_path), "--data-source", "sample", "--out", str(out)]) == 0
    assert check_parquet(out) == len(sample_corpus.qa)
    assert data_cli(["check", str(out)]) == 0
    import pyarrow.parquet as pq

    row = pq.read_table(out).to_pylist()[0]
    assert row["extra_info"]["reference_page_ids"] == ["acme_annual_report_2023_2"]
    assert row["extra_info"]["reference_answers"] == ["$341 million"]


def test_check_rejects_foreign_or_broken_parquet(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    foreign = tmp_path / "gsm8k.parquet"
    pq.write_table(pa.table({"prompt": ["x"], "data_source": ["gsm8k"]}), foreign)
    with pytest.raises(DatasetConversionError, match="missing column"):
        check_parquet(foreign)
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"PAR1 not really")
    assert data_cli(["check", str(broken)]) == 1
    assert "not a readable parquet" in capsys.readouterr().err
    assert data_cli(["check", str(tmp_path / "missing.parquet")]) == 2
    with pytest.raises(ValueError, match="empty dataset"):
        write_parquet([], tmp_path / "empty.parquet")


def test_verl_rlhf_dataset_reads_our_parquet(tmp_path, tiny_qwen25vl_dir):
    """verl's own dataset class (with a VL processor) yields the fields our agent loop reads."""
    pytest.importorskip("verl")
    from omegaconf import OmegaConf
    from transformers import AutoProcessor
    from verl.utils.dataset.rl_dataset import RLHFDataset

    rows, _ = convert_records(UPSTREAM["examples"], "slidevqa_train")
    path = write_parquet(rows, tmp_path / "train.parquet")
    processor = AutoProcessor.from_pretrained(tiny_qwen25vl_dir)
    config = OmegaConf.create({"prompt_key": "prompt", "image_key": "images", "max_prompt_length": 2048,
                               "filter_overlong_prompts": True, "return_raw_chat": True, "truncation": "error",
                               "dataloader_num_workers": 0, "cache_dir": str(tmp_path / "cache")})
    dataset = RLHFDataset(data_files=[str(path)], tokenizer=processor.tokenizer, config=config, processor=processor)
    assert len(dataset) == 2
    item = dataset[1]
    assert item["agent_name"] == "vrag_agent" and item["data_source"] == "slidevqa_train"
    assert item["raw_prompt"][-1]["content"] == "Question: What were Nestle's sales in 2011?"
    assert item["extra_info"]["reference_page_ids"][1].endswith("_7") and item["index"] == 1


def test_check_refuses_rows_of_another_agent_and_names_the_converter_flag(tmp_path, capsys):
    """verl runs each row's `agent_name`, not the config's loop: a file converted for one agent must not train
    another. `check --agent-name` (what the train scripts run) says how to convert for the right one."""
    rows, _ = convert_records(UPSTREAM["examples"], "slidevqa_train")  # default: vrag_agent
    path = write_parquet(rows, tmp_path / "train.parquet")
    assert check_parquet(path, agent_name="vrag_agent") == 2
    with pytest.raises(DatasetConversionError) as err:
        check_parquet(path, agent_name="vimrag_agent")
    text = str(err.value)
    assert "2 row(s) have agent_name 'vrag_agent' but this run trains 'vimrag_agent'" in text
    assert "--agent-name vimrag_agent" in text
    assert data_cli(["check", str(path), "--agent-name", "vimrag_agent"]) == 1
    assert "python -m vrag_rl.training.data convert QA.json --agent-name vimrag_agent" in capsys.readouterr().err
    assert data_cli(["check", str(path), "--agent-name", "vrag_agent"]) == 0
    assert "2 rows OK (agent_name vrag_agent)" in capsys.readouterr().out
    mixed = write_parquet(rows[:1] + convert_records(UPSTREAM["examples"][1:], "x", agent_name="vimrag_agent",
                                                     start_index=1)[0], tmp_path / "mixed.parquet")
    with pytest.raises(DatasetConversionError, match="1 row\\(s\\) have agent_name 'vimrag_agent'"):
        check_parquet(mixed, agent_name="vrag_agent")


def test_rows_start_from_the_runs_prompts(tmp_path, sample_corpus, capsys):
    """`convert --prompts`: the rows' first turn in the words of the run's `vrag.prompts` (a tiny tokenizer knows
    only its task's words); an unknown prompt field is refused (exit 2)."""
    import pyarrow.parquet as pq

    words = tmp_path / "prompts.json"
    words.write_text(json.dumps({"system": "Search, then answer.", "question": "Q: {question}"}))
    out = tmp_path / "train.parquet"
    assert data_cli(["convert", str(sample_corpus.dataset_path), "--data-source", "s", "--out", str(out),
                     "--prompts", str(words)]) == 0
    prompt = pq.read_table(out).to_pylist()[0]["prompt"]
    assert prompt[0] == {"role": "system", "content": "Search, then answer."}
    assert prompt[1]["content"].startswith("Q: ")
    words.write_text(json.dumps({"sytem": "typo"}))
    assert data_cli(["convert", str(sample_corpus.dataset_path), "--data-source", "s", "--out", str(out),
                     "--prompts", str(words)]) == 2
    assert "sytem" in capsys.readouterr().err


def test_the_verl_settings_carry_the_agents_prompts():
    from omegaconf import OmegaConf

    from vrag_rl.training.verl_plugins.settings import PluginSettingsError, plugin_settings

    base = {"vrag": {"search": {"url": "http://127.0.0.1:1"}}}
    assert plugin_settings(OmegaConf.create(base)).prompts == Prompts()
    custom = {"vrag": {**base["vrag"], "prompts": {"question": "Q: {question}"}}}
    assert plugin_settings(OmegaConf.create(custom)).prompts.initial_messages("x")[-1]["content"] == "Q: x"
    with pytest.raises(PluginSettingsError, match="prompts"):
        plugin_settings(OmegaConf.create({"vrag": {**base["vrag"], "prompts": {"qestion": "?"}}}))
