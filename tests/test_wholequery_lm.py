"""LM-sampled additional outputs (the third SCF source) with the packaged SmolLM2 on the demo."""

import numpy as np
import pytest

from model.wholequery.scf import FEATURE_NAMES, subclause_frequencies

pytestmark = pytest.mark.slow


@pytest.fixture
def one_thread():
    """One torch thread: on a busy 2-core machine two threads made this test 30x slower
    (220 s vs 6.5 s measured for one question)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_smollm2_samples_are_sql_strings_that_scf_and_execution_accept(tmp_path, one_thread):
    from model.data.datasets import database_path, load_questions, load_schemas
    from model.data.predictions import load_predictions
    from model.lm import load_causal_lm
    from model.synth.demo import demo_root
    from model.wholequery import build_base_scores, default_methods, generate_lm_samples

    root = demo_root()
    all_questions = load_questions(root, "dev")
    questions = all_questions[:2]
    schemas = load_schemas(root)
    model, tokenizer = load_causal_lm()
    outputs = generate_lm_samples(model, tokenizer, questions, schemas, modes=("nucleus", "beam"), n=2,
                                  max_new_tokens=32, progress=False)
    assert set(outputs) == {"lm_nucleus", "lm_beam"}
    for source, per_q in outputs.items():
        assert set(per_q) == {q.question_id for q in questions}
        for q in questions:
            samples = per_q[q.question_id]
            assert len(samples) == 2 and all(isinstance(s, str) and "\n" not in s for s in samples), samples
            freqs = subclause_frequencies(q.gold_sql, samples, schemas[q.db_id])
            assert freqs.shape == (len(FEATURE_NAMES),) and np.all((freqs >= 0) & (freqs <= 1))
    chosen = {q.question_id for q in questions}
    preds = [p for f in sorted((root / "predictions").glob("*.jsonl"))
             for p in load_predictions(f, all_questions) if p.question_id in chosen]
    table = build_base_scores(questions, preds, schemas,
                              {q.db_id: database_path(root, q.db_id) for q in questions},
                              exec_cache_dir=tmp_path, progress=False, additional_outputs=outputs)
    assert len(table) == len(preds) == 6
    for source in outputs:
        assert f"scf_{source}_product" in table.columns and f"exec_{source}" in table.columns
        assert np.all((table.columns[f"exec_{source}"] >= 0) & (table.columns[f"exec_{source}"] <= 1))
    assert "MPS(SCF lm_beam + exec)" in {m.name for m in default_methods(list(table.columns))}
