"""SCF on the 11 real Spider dev systems: (nearly) everything decomposes after canonicalisation."""

import pytest

import rat
from model.wholequery.scf import decompose, subclause_frequencies

pytestmark = [pytest.mark.data, pytest.mark.slow]


def test_real_predictions_decompose_and_agree_sensibly(shared_data):
    from model.data.datasets import load_questions, load_schemas
    from model.data.predictions import load_predictions

    root = shared_data / "spider"
    questions = load_questions(root, "dev")
    schemas = load_schemas(root)
    db_of = {q.question_id: q.db_id for q in questions}
    files = sorted((shared_data / "predictions" / "spider_dev").iterdir())
    preds = [p for f in files for p in load_predictions(f, questions)]
    assert len(files) == 11 and len(preds) == 11 * 1034
    parts = [decompose(p.sql, schemas[db_of[p.question_id]]) for p in preds]
    assert sum(d is None for d in parts) < 0.005 * len(preds)
    # A gold query against itself and against the other gold queries of its question.
    gold = questions[0].gold_sql
    assert subclause_frequencies(gold, [gold], schemas[questions[0].db_id]).min() == 1.0
    assert rat.canonicalize(gold, schemas[questions[0].db_id])
