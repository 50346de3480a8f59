"""Pooled token probabilities: the fast batched path equals a direct per-token computation."""

import math

import pytest
import torch

from model.lm.token_probabilities import POOLINGS, pool, prompt_text, score_sql, score_sql_naive

CORPUS = [
    "-- Tables: singer(singer_id, name, age, country)",
    "-- Question: How many singers are there?",
    "-- SQL: SELECT count(*) FROM singer WHERE age > 20 ORDER BY name DESC LIMIT 1",
    "SELECT name, country FROM singer JOIN concert ON singer.id = concert.singer_id",
]


@pytest.fixture(scope="module")
def tiny_lm():
    """A 2-layer random Llama with a byte-level BPE trained on a few lines: builds in < 1 s."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(CORPUS * 5, trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<pad>", "<s>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, pad_token="<pad>", bos_token="<s>")
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    # One thread: a model this small gains nothing from more, and on a busy machine waiting for
    # a second thread made each forward pass ~50x slower (measured: 4 s vs 0.1 s per test).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield LlamaForCausalLM(cfg).eval(), tokenizer
    torch.set_num_threads(threads)


ITEMS = [
    (prompt_text("How many singers?", {"singer": ["singer_id", "name"]}), "SELECT count(*) FROM singer"),
    (prompt_text("Names of singers older than 20 by country?", {"singer": ["name", "age", "country"]}),
     "SELECT name FROM singer WHERE age > 20 ORDER BY country"),
    (prompt_text("How many singers?", {"singer": ["singer_id", "name"]}), "SELECT count(*) FROM singer"),
    (prompt_text("Any?"), "SELECT 1"),
]


def test_fast_path_equals_direct_loop(tiny_lm, tmp_path):
    model, tokenizer = tiny_lm
    # A budget this small forces several batches of different lengths, with padding.
    fast = score_sql(model, tokenizer, ITEMS, batch_tokens=64, cache_path=tmp_path / "c.jsonl",
                     progress=False)
    naive = score_sql_naive(model, tokenizer, ITEMS)
    for f, n in zip(fast, naive):
        assert f.n_tokens == n.n_tokens
        assert f.log_prod == pytest.approx(n.log_prod, abs=1e-4)
        for name in ("geo", "min", "avg"):
            assert getattr(f, name) == pytest.approx(getattr(n, name), rel=1e-4)
    assert fast[0] == fast[2]  # the duplicate pair gets the same score


def test_direct_loop_is_the_definition(tiny_lm):
    """The naive scorer itself against a hand-written teacher-forcing loop."""
    model, tokenizer = tiny_lm
    prompt, sql = ITEMS[1]
    p = tokenizer(prompt)["input_ids"]
    s = tokenizer(" " + sql, add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(s).startswith(" SELECT")  # the space belongs to the SQL segment
    log_probs = []
    with torch.no_grad():
        for k, tok in enumerate(s):
            logits = model(input_ids=torch.tensor([p + s[:k]])).logits[0, -1]
            log_probs.append(torch.log_softmax(logits, -1)[tok].item())
    score = score_sql_naive(model, tokenizer, [(prompt, sql)])[0]
    assert score.log_prod == pytest.approx(sum(log_probs), abs=1e-4)
    assert score.min == pytest.approx(math.exp(min(log_probs)), rel=1e-4)


def test_cache_is_reused(tiny_lm, tmp_path):
    model, tokenizer = tiny_lm
    cache = tmp_path / "cache.jsonl"
    first = score_sql(model, tokenizer, ITEMS, cache_path=cache, progress=False)
    assert len(cache.read_text().splitlines()) == 3  # 3 distinct pairs
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)  # a changed model with the same id: only a cache hit returns old scores
    again = score_sql(model, tokenizer, ITEMS, cache_path=cache, progress=False)
    assert again == first
    with torch.no_grad():
        for p in model.parameters():
            p.sub_(1.0)


def test_pool_orders_and_bounds():
    s = pool([math.log(0.9), math.log(0.1), math.log(0.5)])
    assert s.min <= s.geo <= s.avg <= 1 and s.prod <= s.min
    assert POOLINGS == ("prod", "geo", "min", "avg")
    with pytest.raises(ValueError, match="empty"):
        pool([])


def test_token_probabilities_are_the_pooled_scores_components(tiny_lm, tmp_path):
    from model.lm.token_probabilities import sql_token_ids, token_probabilities

    model, tokenizer = tiny_lm
    per_token = token_probabilities(model, tokenizer, ITEMS, batch_tokens=64)
    pooled = score_sql(model, tokenizer, ITEMS, batch_tokens=64, progress=False)
    naive = score_sql_naive(model, tokenizer, ITEMS)
    assert len(per_token) == len(ITEMS)
    for (prompt, sql), (token_ids, probs), fast, slow in zip(ITEMS, per_token, pooled, naive):
        assert token_ids == tokenizer(" " + sql, add_special_tokens=False)["input_ids"]
        assert token_ids == sql_token_ids(tokenizer, sql) and len(probs) == fast.n_tokens
        assert all(0 < p <= 1 for p in probs)
        again = pool([math.log(p) for p in probs])
        assert again.log_prod == pytest.approx(fast.log_prod, abs=1e-9)
        assert (again.geo, again.min, again.avg) == pytest.approx((fast.geo, fast.min, fast.avg), rel=1e-9)
        # ... and against the independent one-pair-at-a-time computation
        assert again.log_prod == pytest.approx(slow.log_prod, abs=1e-4)
        assert again.min == pytest.approx(slow.min, rel=1e-4)


def test_token_level_baseline_uses_the_scorer_tokens(tiny_lm):
    from model.eval.baselines import token_level_scores
    from model.lm.token_probabilities import token_probabilities

    model, tokenizer = tiny_lm
    prompt, sql = ITEMS[1]
    wrong = sql.replace("age > 20", "age < 30")
    out = token_level_scores(model, tokenizer, [(prompt, sql, sql), (prompt, wrong, sql)])
    (probs, labels), (wrong_probs, wrong_labels) = out
    assert probs == pytest.approx(token_probabilities(model, tokenizer, [(prompt, sql)])[0].probabilities)
    assert labels == [1] * len(probs)  # identical to gold: every token aligned and equal
    assert len(wrong_labels) == len(wrong_probs) and 0 < sum(wrong_labels) < len(wrong_labels)


@pytest.mark.parametrize("mode", ["nucleus", "beam"])
def test_sample_outputs_gives_n_cut_sql_strings_per_prompt(tiny_lm, mode):
    from model.lm.token_probabilities import sample_outputs

    model, tokenizer = tiny_lm
    prompts = [ITEMS[0][0], ITEMS[1][0], ITEMS[3][0]]  # different lengths: left padding in one batch
    out = sample_outputs(model, tokenizer, prompts, n=2, mode=mode, max_new_tokens=6, batch_size=2)
    assert len(out) == 3 and all(len(samples) == 2 for samples in out)
    assert all(isinstance(s, str) and "\n" not in s and ";" not in s and s == s.strip()
               for samples in out for s in samples)
    # Seeded (nucleus) or deterministic (beam): the same call gives the same samples, and the
    # batch does not change a prompt's outputs.
    assert sample_outputs(model, tokenizer, prompts, n=2, mode=mode, max_new_tokens=6, batch_size=2) == out
    if mode == "beam":
        alone = sample_outputs(model, tokenizer, prompts[1:2], n=2, mode=mode, max_new_tokens=6)
        assert alone[0] == out[1]
    with pytest.raises(ValueError, match="mode"):
        sample_outputs(model, tokenizer, prompts, mode="greedy")


def test_cache_keys_a_half_precision_model_apart(tiny_lm, tmp_path):
    """bfloat16 token probabilities differ from float32 ones: they never answer for each other."""
    import copy

    model, tokenizer = tiny_lm
    cache = tmp_path / "cache.jsonl"
    score_sql(model, tokenizer, ITEMS, cache_path=cache, progress=False)
    half = copy.deepcopy(model).to(torch.bfloat16)
    score_sql(half, tokenizer, ITEMS, cache_path=cache, progress=False)
    assert len(cache.read_text().splitlines()) == 6  # 3 distinct pairs for each precision
    score_sql(model, tokenizer, ITEMS, cache_path=cache, progress=False)
    assert len(cache.read_text().splitlines()) == 6  # float32 again: all hits
