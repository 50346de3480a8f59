"""The scorer LM run by llama.cpp (``<gguf>@llama.cpp``, optional: ``make setup-qwen`` installs
llama-cpp-python): the same token log-probabilities as transformers' de-quantized copy of the
same GGUF, read through the same scoring path and cache; skipped where llama-cpp-python is not
installed (CI)."""

import numpy as np
import pytest

from model.lm import load_causal_lm
from model.lm.load import default_lm_path
from model.lm.token_probabilities import prompt_text, scores_cache_path, token_probabilities

pytest.importorskip("llama_cpp")

PROMPT = prompt_text("How many singers are there?", {"singer": ["singer_id", "name", "age"],
                                                      "concert": ["concert_id", "year"]})
SQLS = ["SELECT count(*) FROM singer", "SELECT count(*) FROM concert", "SELECT name FROM singer WHERE age > 20"]


@pytest.fixture(scope="module")
def both():
    folder, gguf = default_lm_path()  # the packaged SmolLM2 GGUF, read both ways
    return load_causal_lm(f"{folder / gguf}@llama.cpp"), load_causal_lm(None)


def test_llama_cpp_gives_the_token_log_probs_transformers_gives(both):
    (cpp, cpp_tok), (hf, hf_tok) = both
    items = [(PROMPT, s) for s in SQLS]
    fast = token_probabilities(cpp, cpp_tok, items)
    slow = token_probabilities(hf, hf_tok, items)
    for a, b in zip(fast, slow):
        assert a.token_ids == b.token_ids  # the GGUF's own tokenizer, the same ids
        la, lb = np.log(a.probabilities), np.log(b.probabilities)
        assert np.corrcoef(la, lb)[0, 1] > 0.99 and np.abs(la - lb).max() < 0.5
    # a table the question does not name is the least likely token, either way
    assert np.argmin(np.log(fast[1].probabilities)) == len(fast[1].token_ids) - 1


def test_llama_cpp_values_are_cached_apart_from_transformers_ones(both, tmp_path):
    (cpp, cpp_tok), _ = both
    cache = tmp_path / "scores.jsonl"
    first = token_probabilities(cpp, cpp_tok, [(PROMPT, SQLS[0])], cache_path=cache)
    assert "llama.cpp" in cpp.model_id and len(cache.read_text().splitlines()) == 1
    again = token_probabilities(cpp, cpp_tok, [(PROMPT, SQLS[0])], cache_path=cache)
    assert again[0].probabilities == first[0].probabilities and len(cache.read_text().splitlines()) == 1
    assert scores_cache_path("qwen_coder@llama.cpp").name == "qwen_coder@llama.cpp.jsonl"


def test_a_missing_gguf_is_one_line(tmp_path):
    with pytest.raises(FileNotFoundError, match="no GGUF file at"):
        load_causal_lm(f"{tmp_path / 'none.gguf'}@llama.cpp")


def test_a_sql_longer_than_the_context_gets_nan_not_an_error(both):
    (cpp, cpp_tok), _ = both
    from model.lm.load import LlamaCppLM

    small = LlamaCppLM(cpp.path, context=64)
    prompt = cpp_tok(PROMPT)["input_ids"]
    short, long = cpp_tok(" SELECT 1")["input_ids"], cpp_tok(" SELECT " + ", ".join(["name"] * 40))["input_ids"]
    fitted, unfitted = small.prompt_group_log_probs(prompt, [short, long])
    assert all(np.isfinite(fitted)) and len(unfitted) == len(long) and all(np.isnan(unfitted))
