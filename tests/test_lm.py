"""The LM loader: packaged SmolLM2 through from_pretrained, its safetensors cache, offline errors."""

import pytest
import torch

from model.lm import default_lm_path, load_causal_lm


@pytest.fixture(scope="module")
def packaged_lm():
    return load_causal_lm()


def test_packaged_model_is_a_causal_lm(packaged_lm):
    model, tokenizer = packaged_lm
    assert model.config.hidden_size == 576 and model.config.num_hidden_layers == 30
    assert not model.training
    ids = tokenizer("select name from singer", return_tensors="pt").input_ids
    logits = model(ids).logits
    assert logits.shape == (1, ids.shape[1], model.config.vocab_size)
    assert torch.isfinite(logits).all()


@pytest.mark.parametrize(
    "text",
    ["SELECT count(*) FROM singer WHERE age > 20", "((singer.name)(singer)Project)", "  ünïcode\tand\nlines "],
)
def test_tokenizer_round_trip(packaged_lm, text):
    _, tokenizer = packaged_lm
    ids = tokenizer(text, add_special_tokens=False).input_ids
    assert tokenizer.decode(ids) == text


def test_default_path_points_at_packaged_gguf():
    folder, gguf_file = default_lm_path()
    assert (folder / gguf_file).stat().st_size > 10_000_000


def test_unknown_hub_id_offline_names_the_id():
    """One line naming the id (a UsageError: train.py says it and exits 2), still an OSError."""
    from model.errors import UsageError
    from model.lm import load_encoder

    for load, what in ((load_causal_lm, "causal LM"), (load_encoder, "encoder")):
        with pytest.raises(OSError, match="no-such-org/no-such-model") as e:
            load("no-such-org/no-such-model")
        assert isinstance(e.value, UsageError) and "\n" not in str(e.value)
        assert str(e.value).startswith(f"could not load {what} 'no-such-org/no-such-model': ")


def test_a_negative_embedder_layer_is_one_line_naming_the_key():
    from model.errors import UsageError
    from model.nodes.embedder import FrozenEmbedder

    with pytest.raises(UsageError, match=r"^model.embedder.layer must be a whole number of 0 or more; found -1$"):
        FrozenEmbedder(layer=-1)


@pytest.mark.slow
def test_cache_reload_gives_identical_logits(tmp_path):
    """Converting into a fresh cache and reloading matches the GGUF loaded directly, bit for bit."""
    from transformers import AutoModelForCausalLM

    folder, gguf_file = default_lm_path()
    direct = AutoModelForCausalLM.from_pretrained(str(folder), gguf_file=gguf_file, dtype=torch.float32)
    converted, tokenizer = load_causal_lm(folder, gguf_file=gguf_file, cache_dir=tmp_path)
    assert (tmp_path / gguf_file.removesuffix(".gguf") / "model.safetensors").is_file()
    reloaded, _ = load_causal_lm(folder, gguf_file=gguf_file, cache_dir=tmp_path)
    ids = tokenizer("select avg(age) from singer", return_tensors="pt").input_ids
    with torch.no_grad():
        expected = direct(ids).logits
        assert torch.equal(converted(ids).logits, expected)
        assert torch.equal(reloaded(ids).logits, expected)
