"""A saved model's run / review / regenerate policy (``model.json``'s ``policy``): thresholds on
the whole-query confidence and the targets they were chosen for. Chosen by
``model.scoring.verdict.choose_policy``; read and checked here, with the rest of the file
format (``model.nodes.model_file``).

>>> policy = Policy(run_at=0.9, regenerate_below=0.4)
>>> policy.action(0.95), policy.action(0.6), policy.action(0.1)
('run', 'review', 'regenerate')
>>> blind = Policy(run_at=0.97, regenerate_below=0.3)  # for queries scored without their database
>>> both = Policy(0.9, 0.4, without_database=blind)
>>> both.for_database(False).action(0.95), Policy.from_dict(both.to_dict()) == both
('review', True)
>>> Policy.from_dict({"run_at": 0.3, "regenerate_below": 0.5})
Traceback (most recent call last):
...
ValueError: regenerate_below 0.5 is above run_at 0.3
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

ACTIONS = ("run", "review", "regenerate")
MAX_WRONG = 0.05  # the default target: at most this share wrong among the queries run
MAX_RIGHT_REGENERATED = 0.25  # ... and at most this share right among the queries sent back


@dataclass(frozen=True)
class Policy:
    """Confidence thresholds and the targets they were chosen for: a query at or above
    ``run_at`` runs, below ``regenerate_below`` is sent back, in between goes to a person.
    ``run_at`` None: no threshold met the target, nothing runs unseen. ``without_database``: the
    thresholds for queries scored without their database, chosen the same way on those
    queries' own out-of-fold curve (None: such a query never runs unseen)."""

    run_at: float | None
    regenerate_below: float
    max_wrong: float = MAX_WRONG
    max_right_regenerated: float = MAX_RIGHT_REGENERATED
    label: str = "execution_match"  # what "wrong" means on the curve the thresholds were chosen on
    measured: dict = field(default_factory=dict)  # the out-of-fold shares at these thresholds
    without_database: Policy | None = None

    def __post_init__(self) -> None:
        for name in ("run_at", "regenerate_below", "max_wrong", "max_right_regenerated"):
            object.__setattr__(self, name, _share(name, getattr(self, name), optional=name == "run_at"))
        if self.run_at is not None and self.regenerate_below > self.run_at:
            raise ValueError(f"regenerate_below {self.regenerate_below} is above run_at {self.run_at}")
        if not isinstance(self.label, str) or not isinstance(self.measured, Mapping):
            raise TypeError("label: expected a string; measured: an object")
        object.__setattr__(self, "measured", dict(self.measured))
        if self.without_database is not None and not isinstance(self.without_database, Policy):
            raise TypeError(f"without_database: expected a Policy, found {type(self.without_database).__name__}")

    def for_database(self, with_database: bool) -> Policy | None:
        """The thresholds for a query scored with (or without) its database; None without a
        database when the model has no policy for that."""
        return self if with_database else self.without_database

    def action(self, query_confidence: float) -> str:
        if self.run_at is not None and query_confidence >= self.run_at:
            return "run"
        return "regenerate" if query_confidence < self.regenerate_below else "review"

    @property
    def target(self) -> str:
        """The targets the thresholds were chosen for; for thresholds given without a measured
        curve (``measured`` empty), those thresholds.

        >>> Policy(0.0, 0.0).target
        'thresholds given (run at 0.00 or above, regenerate below 0.00), not chosen on a measured curve'
        """
        if not self.measured:
            run = "never run unseen" if self.run_at is None else f"run at {self.run_at:.2f} or above"
            return f"thresholds given ({run}, regenerate below {self.regenerate_below:.2f}), not chosen on a measured curve"
        return (f"at most {self.max_wrong:.0%} wrong among the queries run, at most "
                f"{self.max_right_regenerated:.0%} right among those sent back ({self.label}, out of fold)")

    def to_dict(self) -> dict:
        out = {"target": self.target, **asdict(self)}
        out["without_database"] = self.without_database.to_dict() if self.without_database else None
        return out

    @classmethod
    def from_dict(cls, saved: Any) -> Policy:
        """The policy of a ``model.json``; ``ValueError`` or ``TypeError`` (one line) naming what
        is malformed."""
        if not isinstance(saved, Mapping):
            raise TypeError(f"expected an object, found {type(saved).__name__}")
        blind = saved.get("without_database")
        if blind is not None:
            if isinstance(blind, Mapping) and blind.get("without_database") is not None:
                raise ValueError("without_database: holds a without_database of its own")
            try:
                blind = cls.from_dict(blind)
            except (TypeError, ValueError) as e:
                raise type(e)(f"without_database: {e}") from None
        return cls(saved.get("run_at"), saved.get("regenerate_below"), saved.get("max_wrong", MAX_WRONG),
                   saved.get("max_right_regenerated", MAX_RIGHT_REGENERATED),
                   saved.get("label", "execution_match"), saved.get("measured", {}), blind)


def _share(name: str, value: Any, optional: bool = False) -> float | None:
    """``value`` as a float in [0, 1] (None where ``optional``); ``ValueError`` naming ``name``."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ValueError(f"{name}: expected a number in [0, 1], found {value!r}"[:160])
    return float(value)
