"""Training where neither the data nor the LM is (a lent GPU): a sources file and an exported
embedding table reproduce a run exactly, refuse what they were not built for, and cross-fitted
runs of different folds merge into one."""

import json
from pathlib import Path

import pytest
import torch

import model.nodes.embedder as embedder_module
from model.errors import UsageError
from model.nodes.datamodule import NodeDataModule, read_sources
from model.nodes.embedder import FrozenEmbedder, TableRows, export_table, table_ids
from model.train import main as train_main
from model.train import merge_crossfit_runs, train
from tests.test_train import TINY, compose_cfg

CROSSFIT = [*TINY, "data.protocol=crossfit", "data.folds=3"]


def _run(tmp_path: Path, name: str, *overrides: str) -> Path:
    train(compose_cfg([*CROSSFIT, *overrides], tmp_path / name))
    return tmp_path / name


def test_a_pack_reproduces_the_run_without_tokenizer_or_lm_and_folds_merge(tmp_path, monkeypatch):
    sources = tmp_path / "pack" / "sources.jsonl.gz"
    built = _run(tmp_path, "built", "data.run_folds=[0]", f"data.sources_file={sources}")
    pad, read = read_sources(sources)
    assert read["eval_predicted"] and all(e.input_ids and e.node_labels for e in read["eval_predicted"])
    ids = table_ids(pad, read)
    table = tmp_path / "pack" / "table.safetensors"
    assert export_table(ids, table, dtype="float32") == len(ids)

    def unavailable(*args, **kwargs):
        raise AssertionError("the pack must need neither the tokenizer nor the LM")

    monkeypatch.setattr(NodeDataModule, "tokenizer", unavailable)
    monkeypatch.setattr(embedder_module, "load_causal_lm", unavailable)
    packed = [f"data.sources_file={sources}", f"model.embedder.table={table}"]
    again = _run(tmp_path, "again", "data.run_folds=[0]", *packed)
    assert (again / "predictions" / "test.jsonl").read_text() == (built / "predictions" / "test.jsonl").read_text()

    other = _run(tmp_path, "other", "data.run_folds=[1]", *packed)
    metrics = merge_crossfit_runs([built, other], tmp_path / "merged", data_root=str(tmp_path))
    rows = [json.loads(line) for line in (tmp_path / "merged" / "predictions" / "test.jsonl").open()]
    assert {r["fold"] for r in rows} == {0, 1} and metrics["test/examples"] == len(rows)
    assert sorted(json.loads((tmp_path / "merged" / "data.json").read_text())["folds"]) == ["0", "1"]
    config = json.loads((tmp_path / "merged" / "config.json").read_text())
    assert config["data"]["root"] == str(tmp_path.resolve()) and config["data"]["run_folds"] == [0, 1]
    with pytest.raises(UsageError, match=r"fold\(s\) \['0'\] are already in another run"):
        merge_crossfit_runs([built, again], tmp_path / "twice")


def test_a_sources_file_built_under_other_settings_is_refused(tmp_path):
    sources = tmp_path / "sources.jsonl.gz"
    _run(tmp_path, "a", "data.run_folds=[0]", f"data.sources_file={sources}")
    with pytest.raises(UsageError, match="was built with max_tokens=512, not 256: delete it to rebuild"):
        _run(tmp_path, "b", "data.run_folds=[0]", f"data.sources_file={sources}", "model.encoder.max_positions=256")


def test_table_rows_are_the_lms_rows_and_refuse_ids_they_lack(tmp_path):
    table = tmp_path / "t.safetensors"
    export_table([7, 42, 300], table, dtype="float32")
    ids = torch.tensor([[42, 7, 300]])
    full = FrozenEmbedder(layer=0)(ids, torch.ones_like(ids))
    assert torch.equal(FrozenEmbedder(table=table)(ids, torch.ones_like(ids)), full)
    with pytest.raises(UsageError, match=r"token ids \[8, 100000\] \(2 in all\) are not in the embedding table"):
        TableRows.load(table)(torch.tensor([[7, 8, 100000]]))
    with pytest.raises(UsageError, match="layer 0"):
        FrozenEmbedder(table=table, layer=2)
    with pytest.raises(UsageError, match="model.embedder.table=.*nope.safetensors: no such file"):
        FrozenEmbedder(table=tmp_path / "nope.safetensors")


def test_merge_and_export_commands_name_a_bad_input_in_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        train_main(["merge", "--out", str(tmp_path / "m"), str(tmp_path / "nope")])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.strip() == f"python -m model.train: error: {tmp_path / 'nope'}: not a run directory (no data.json)"
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "data.json").write_text("{not json")
    with pytest.raises(SystemExit) as exit_:
        train_main(["merge", "--out", str(tmp_path / "m"), str(broken)])
    assert capsys.readouterr().err.strip() == f"python -m model.train: error: {broken / 'data.json'}: not JSON (Expecting property name enclosed in double quotes)"
    with pytest.raises(SystemExit) as exit_:
        embedder_module.main(["--sources", str(tmp_path / "none.gz"), "--out", str(tmp_path / "t")])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.strip().endswith(f"--sources {tmp_path / 'none.gz'}: no such file")


def test_the_label_kind_is_part_of_the_sources_key(tmp_path):
    """A sources file built with one ``data.labels`` is refused for another."""
    import hydra

    cfg = compose_cfg([*CROSSFIT, "data.labels=execution", f"data.sources_file={tmp_path / 'execution'}.jsonl.gz"])
    module = hydra.utils.instantiate(cfg.data, _convert_="all")
    module.build_sources()
    assert any(not all(e.node_labels) for e in module.sources["eval_predicted"])
    with pytest.raises(UsageError, match="was built with labels=execution, not tree"):
        read_sources(tmp_path / "execution.jsonl.gz", {**module.sources_key(), "labels": "tree"})
