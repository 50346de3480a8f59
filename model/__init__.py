"""Node scorers, whole-query calibration, evaluation; ``from model import Scorer`` scores new SQL.

The scorer is imported on first use, so ``import model.<module>`` stays cheap.
"""

__all__ = ["Scorer"]


def __getattr__(name: str):
    if name == "Scorer":
        from model.scoring import Scorer

        return Scorer
    raise AttributeError(f"module 'model' has no attribute {name!r}")
