"""Confidence for SQL: ``Scorer`` scores a query node by node with the shipped model and returns
a ``ScoredQuery`` of ``ScoredNode`` s (``score_many`` gives a ``RowError`` for a row it cannot
read; ``ModelFileError`` is a model directory it cannot use).

>>> from model import Scorer
>>> scored = Scorer.pretrained().score("SELECT name FROM singer WHERE age > 20",
...                                    schema={"singer": ["singer_id", "name", "age"]})
>>> type(scored).__name__, type(scored.nodes[0]).__name__
('ScoredQuery', 'ScoredNode')
>>> [bad] = Scorer.pretrained().score_many([{"sql": "SELEC name"}], progress=False)
>>> type(bad).__name__
'RowError'

``Scorer.check`` decides what to do with a query (``Verdict``: run, review or regenerate, with
feedback); ``guard`` wraps a ``run_sql(sql)`` function so that only queries to run reach it:

>>> from model import Verdict
>>> verdict = Scorer.pretrained().check("SELECT count(*) FROM singer", question="How many singers?",
...                                     schema={"singer": ["singer_id", "name"]})
>>> isinstance(verdict, Verdict), verdict.action  # no database: the policy's own thresholds
(True, 'run')
>>> Scorer.pretrained().check("SELECT count(*) FROM singer WHERE name = 1", question="How many singers?",
...                           schema={"singer": ["singer_id", "name"]}).action
'review'

The names are imported on first use, so ``import model.<module>`` stays cheap.
"""

__all__ = ["ModelFileError", "QueryHeld", "RowError", "ScoredNode", "ScoredQuery", "Scorer", "Verdict", "guard"]


def __getattr__(name: str):
    if name in __all__:
        import model.scoring

        return getattr(model.scoring, name)
    raise AttributeError(f"module 'model' has no attribute {name!r}")
