"""`score_many` with worker processes, called from threads (a web app's): each worker read the
scorer from one module-wide name, so two scorers' threads could fork workers that computed the
other model's feature columns (confidences wrong without an error, or an IndexError), and a fork
beside a thread inside SQLite copied its held lock (the worker waited forever). Off the main
thread the batches are prepared here; each pool's workers are handed their own scorer."""

import threading

from model.scoring.scorer import Scorer, _worker_count


def test_no_worker_processes_off_the_main_thread():
    assert _worker_count(4, 8) == 4 and _worker_count(None, 1) == 1
    seen = []
    thread = threading.Thread(target=lambda: seen.append((_worker_count(4, 8), _worker_count(None, 8))))
    thread.start()
    thread.join()
    assert seen == [(1, 1)]


def test_each_pools_workers_prepare_with_their_own_scorer(monkeypatch):
    """The workers are handed their pool's scorer as they start; nothing module-wide is set
    here for them (another thread's scorer could be read from it), and two models (different
    feature columns) score as they do without workers."""
    import model.scoring.scorer as scoring

    started = []
    real = scoring.start_pool
    monkeypatch.setattr(scoring, "start_pool", lambda *a, **k: (started.append(k), real(*a, **k))[1])
    rows = [{"sql": "SELECT name FROM singer WHERE age > 20", "question": "Singers older than 20?",
             "schema": {"singer": ["singer_id", "name", "age"]}},
            {"sql": "SELECT count(*) FROM singer", "question": "How many singers?",
             "schema": {"singer": ["singer_id", "name", "age"]}}] * 4
    for name in ("spider", "spider_transfer"):
        scorer = Scorer.pretrained(name)
        alone = [r.query_confidence for r in scorer.score_many(rows, progress=False, workers=1)]
        forked = [r.query_confidence for r in scorer.score_many(rows, progress=False, workers=2, batch_size=2)]
        assert forked == alone and scoring._PREPARING is None
        assert started[-1]["initargs"] == (scorer,)
