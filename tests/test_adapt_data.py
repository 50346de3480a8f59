"""rat-adapt's shipped teacher and adaptation on real data: the consensus teacher reproduces its
training run's in-sample numbers; the shipped Spider model, adapted on the CodeS systems' BIRD
outputs of some databases (no labels read), ranks the nodes of other BIRD databases better
than it does cold."""

import numpy as np
import pytest

from model import metrics as M
from model.data.datasets import load_schemas
from model.nodes.estimator import data_digest
from model.nodes.examples import build_examples
from model.scoring import RowError, Scorer
from model.scoring.adapt import adapt

pytestmark = [pytest.mark.data, pytest.mark.slow]


def _rows(root, examples):
    schemas = load_schemas(root)
    return [{"sql": e.sql, "question": e.question, "db_id": e.db_id, "schema": schemas[e.db_id],
             "question_id": e.question_id, "system": e.system} for e in examples]


def _node_auc(results, examples) -> float:
    assert not [r for r in results if isinstance(r, RowError)]
    return M.auc(np.concatenate([[n.confidence for n in r.nodes] for r in results]),
                 np.concatenate([e.node_labels for e in examples]))


def test_the_shipped_teacher_reproduces_its_in_sample_numbers(shared_data):
    root = shared_data / "spider"
    files = sorted((shared_data / "predictions" / "spider_dev").iterdir())
    examples, _ = build_examples(root, "dev", prediction_files=files, require_database=True, verbose=False)
    examples = [e for e in examples if e.execution_match is not None]
    scorer = Scorer.pretrained("spider_consensus")
    info = scorer.saved.info_
    assert data_digest(examples) == info["trained_on"]["digest"] and info["config"]["database"] == "without"
    results = scorer.score_many(_rows(root, examples), progress=False, spans=False)  # no database
    assert _node_auc(results, examples) == pytest.approx(info["metrics"]["in_sample"]["auc"], abs=1e-6)


def test_adapting_the_spider_model_on_bird_outputs_helps_on_other_bird_databases(shared_data):
    root = shared_data / "bird"
    files = sorted((shared_data / "predictions" / "bird_dev").iterdir())
    examples, _ = build_examples(root, "dev", prediction_files=files, require_database=False, evidence=True,
                                 labels="tree", verbose=False)
    databases = sorted({e.db_id for e in examples})
    seen, unseen = set(databases[::3]), set(databases[1::3])  # a third to adapt on, a third to test
    rows = _rows(root, examples)
    base = Scorer.pretrained().saved
    adapted = adapt(base, Scorer.pretrained("spider_consensus").saved, [r for r in rows if r["db_id"] in seen],
                    progress=False, hgb={**base.info_["config"]["hgb"], "max_iter": 150}, label_shift=True)
    assert adapted.shared_questions > 300 and len(adapted.systems) == 4
    # BIRD's outputs are right less often: estimated so (EM runs to a rate near 0 on them: a shift
    # that does not fit, so the teacher's confidences are not moved, and rat-adapt says why)
    assert adapted.query_shift.rate < adapted.teacher_rates[1]
    assert adapted.query_shift.fits or (adapted.estimated_rates is None and adapted.not_shifted)
    tested = [k for k, e in enumerate(examples) if e.db_id in unseen]
    alone = [{k: v for k, v in rows[i].items() if k not in ("question_id", "system")} for i in tested]
    cold = _node_auc(Scorer.pretrained().score_many(alone, progress=False, spans=False), [examples[i] for i in tested])
    warm = _node_auc(Scorer(adapted.model).score_many(alone, progress=False, spans=False),
                     [examples[i] for i in tested])
    assert warm > cold + 0.02, (cold, warm)


def test_recalibrating_the_spider_model_on_50_labelled_bird_outputs_calibrates_it_on_other_databases(shared_data):
    from model.data.datasets import load_questions
    from model.scoring.recalibrate import recalibrate

    root = shared_data / "bird"
    files = sorted((shared_data / "predictions" / "bird_dev").iterdir())
    examples, _ = build_examples(root, "dev", prediction_files=files, require_database=False, evidence=True,
                                 labels="tree", verbose=False)
    golds = {q.question_id: q.gold_sql for q in load_questions(root, "dev")}
    databases = sorted({e.db_id for e in examples})
    rows = _rows(root, examples)
    pool = [k for k, e in enumerate(examples) if e.db_id in set(databases[::3])]
    labelled = [{**rows[k], "gold": golds[examples[k].question_id]}
                for k in np.random.default_rng(0).choice(pool, 50, replace=False)]
    result = recalibrate(Scorer.pretrained().saved, labelled, progress=False)
    assert result.labels == {"tree": 50}  # no database: the gold tree, as BIRD's labels here
    tested = [k for k, e in enumerate(examples) if e.db_id in set(databases[1::3])]
    correct = np.array([examples[k].correct for k in tested])
    ece = {}
    for name, model in (("cold", Scorer.pretrained().saved), ("recalibrated", result.model)):
        scored = Scorer(model).score_many([rows[k] for k in tested], progress=False, spans=False)
        ece[name] = M.ece(np.array([r.query_confidence for r in scored]), correct)
    assert ece["cold"] > 0.3 and ece["recalibrated"] < 0.15, ece


def test_the_shipped_transfer_model_ranks_bird_nodes_better_than_the_spider_model(shared_data):
    """pretrained:spider_transfer (fitted on Spider only, with perturbations of its gold queries)
    on every BIRD dev output the four CodeS files hold, no databases, tree labels: its node AUC
    is well above the shipped Spider model's (docs/model_card.md: 0.778 against 0.748)."""
    root = shared_data / "bird"
    files = sorted((shared_data / "predictions" / "bird_dev").iterdir())
    examples, _ = build_examples(root, "dev", prediction_files=files, require_database=False, evidence=True,
                                 labels="tree", verbose=False)
    rows = [{k: v for k, v in r.items() if k not in ("question_id", "system")} for r in _rows(root, examples)]
    shipped = _node_auc(Scorer.pretrained().score_many(rows, progress=False, spans=False), examples)
    transfer = _node_auc(Scorer.load("pretrained:spider_transfer").score_many(rows, progress=False, spans=False),
                         examples)
    assert transfer > shipped + 0.02 and transfer > 0.77, (shipped, transfer)
