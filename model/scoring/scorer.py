"""Score your own SQL: per-node confidence, error-site scores, a calibrated whole-query
confidence, "look here first" and plain-language reasons, from a saved model.

>>> from model import Scorer
>>> scorer = Scorer.pretrained()
>>> scored = scorer.score("SELECT name FROM singer WHERE age > 20",
...                       question="Names of singers older than 20?",
...                       schema={"singer": ["singer_id", "name", "age"]})
>>> [n.label for n in scored.nodes]
['singer.name', 'singer.age', '20', 'Gt', 'singer', 'Selection', 'Project']
>>> 0.0 < scored.query_confidence < 1.0 and all(0 <= n.confidence <= 1 for n in scored.nodes)
True
>>> look = scored.nodes[scored.look_here_first]
>>> scored.sql[look.span[0]:look.span[1]] == look.text
True
>>> sorted(scored.to_dict())[:4]
['db_id', 'dialect', 'look_here_first', 'look_here_reliability']
>>> 0.0 < scored.look_here_reliability < 1.0  # how often such a pointer was right, out of fold
True

Without a database the database features are missing (NaN) and the model still scores; with
one (``database=`` a SQLite or DuckDB file, a URL such as ``postgresql://user:pw@host/db``, or an
open connection; ``model.data.databases``) it is opened read-only, and read for the schema too
when none is given. SQL written for another database
is read in its dialect (``dialect="postgres"``; ``rat.DIALECTS``):

>>> scored = scorer.score("SELECT DISTINCT ON (country) name FROM singer WHERE name ILIKE 'a%' "
...                       "ORDER BY country", schema={"singer": ["name", "country"]}, dialect="postgres")
>>> [n.label for n in scored.nodes][-6:]
['Ilike', 'singer', 'Selection', 'Project', 'Distinct_on', 'Orderby_asc']
"""

from __future__ import annotations

import functools
import gc
import math
import pickle
import re
import threading
import unicodedata
import warnings
import zipfile
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import rat
from model.data.databases import (
    Database,
    DatabaseError,
    SqliteDatabase,
    is_sqlite_path,
    open_database,
    refusal,
)
from model.data.execution import check_deadline, sqlite_problem, unfinished
from model.errors import ModelFileError, UsageError, check_seconds, start_pool
from model.label_shift import RateShift
from model.nodes.estimator import BoostedNodeModel, kind_group
from model.scoring.choice import MAX_CANDIDATES
from model.scoring.fields import (
    MAX_NODES,
    MAX_SQL_CHARS,
    ROW_FIELDS,
    SCORING_RESULT_BYTES,
    dialect_name,
    misspelt_field,
    question_problem,
    type_problem,
)
from model.scoring.reasons import Reason, ReasonContext, best_matches, explain_nodes, literal_of
from rat.errors import InternalError
from rat.text import printable

# spider_consensus: rat-adapt's teacher; spider_transfer: fitted on Spider to score another
# benchmark (docs/model_card.md)
PRETRAINED = {name: Path(__file__).resolve().parent / "pretrained" / name
              for name in ("spider", "spider_consensus", "spider_transfer")}
# Nodes below this confidence get reasons (and "look here first" always does), the least
# confident REASON_NODES of them at most: reasons for every node of a huge query would cost
# (nodes x features) model rows for text no one reads.
REASONS_BELOW = 0.5
REASON_NODES = 64
# Calls scoring more rows than this freeze the heap while they run (``_heap_frozen``); a few rows
# gain nothing from it, and rat-serve's requests, frozen back to back, parked the garbage of the
# requests in flight at each freeze in the oldest generation: the server grew by about 0.4 MB/s
# under load (flat without the freeze).
FREEZE_ROWS = 64
_DATABASE_PROBLEM = "_database_problem"  # a row's field: why its database could not be read


@dataclass
class ScoredNode:
    index: int  # post-order position (the root is last)
    label: str  # "singer.name", "'Alameda'", "Count", "Project"
    kind: str  # table | column | value | the operator label
    depth: int  # 0 at the root
    children: tuple[int, ...]  # post-order indices of the children
    confidence: float  # calibrated probability that this node's subtree is right
    site_score: float  # how likely this node is where the query goes wrong
    span: tuple[int, int] | None  # [start, end) of the node's subtree in the SQL as written
    text: str | None  # the SQL text of that span
    reasons: list[Reason] = field(default_factory=list)
    # an operator the model's features have no code for (``model.nodes.features.known_kind``:
    # read as any unknown operator, so its confidence cannot reflect what the node does)
    unfamiliar: bool = False

    def to_dict(self) -> dict:
        return {"label": self.label, "kind": self.kind, "confidence": round(self.confidence, 6),
                "site_score": None if math.isnan(self.site_score) else round(self.site_score, 6),
                "span": list(self.span) if self.span else None, "children": list(self.children),
                "reasons": [r.to_dict() for r in self.reasons], "unfamiliar": self.unfamiliar}


@dataclass
class ScoredQuery:
    sql: str
    question: str
    nodes: list[ScoredNode]  # post-order
    query_confidence: float  # calibrated probability that the whole query is right
    look_here_first: int  # post-order index of the most likely error site
    runner_up: int | None  # the second most likely
    db_id: str | None = None
    question_id: str | None = None
    tree: rat.Node | None = field(default=None, repr=False)
    schema: rat.Schema | None = field(default=None, repr=False)
    dialect: str = "sqlite"  # the SQL dialect the query was read in (rat.DIALECTS)
    features: np.ndarray | None = field(default=None, repr=False)  # (nodes, model features); boosted only
    # out of fold on the model's training data, the share of wrong queries whose pointer, scored
    # like this one (the same site-score bin), was on an error site; None when the model has none
    look_here_reliability: float | None = None
    with_database: bool = True  # scored with its database (execution features, values) or without
    # why the query did not run on its database: the database's error, or why it was not run or
    # read to the end (`timeout after 5 s`, `result has more than 1000000 rows`, parameters: then
    # scored without its result); None where it ran or was scored without one
    execution_error: str | None = None
    # label shift (model.label_shift): the file's estimated rate of right queries, and this
    # query's confidence before it was moved to that rate; None where the file was not shifted
    label_shift: RateShift | None = field(default=None, repr=False)
    unshifted_confidence: float | None = field(default=None, repr=False)
    # the literals its scoring looked up in the other columns (the `literal_elsewhere` feature),
    # by post-order node index: the columns that store each, in the schema's order (None: unknown);
    # a verdict names them from here (``model.nodes.features.NodeFeatures.columns_holding``)
    columns_holding: dict[int, tuple[str, ...] | None] = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict:
        """The JSON row ``rat-score`` writes and ``rat-serve`` answers."""
        look = self.nodes[self.look_here_first]
        second = self.nodes[self.runner_up] if self.runner_up is not None else None
        return {"question_id": self.question_id, "db_id": self.db_id, "question": self.question,
                "sql": self.sql, "dialect": self.dialect, "query_confidence": round(self.query_confidence, 6),
                "look_here_first": self.look_here_first,
                "look_here_span": list(look.span) if look.span else None,
                "look_here_reliability": (None if self.look_here_reliability is None
                                          else round(self.look_here_reliability, 3)),
                "runner_up": self.runner_up,
                "runner_up_span": list(second.span) if second is not None and second.span else None,
                "nodes": [n.to_dict() for n in self.nodes],
                **({"execution_error": self.execution_error} if self.execution_error else {}),
                **({"query_confidence_unshifted": round(self.unshifted_confidence, 6),
                    "label_shift": self.label_shift.to_dict()} if self.label_shift is not None else {})}

    def __str__(self) -> str:
        return format_scored(self)


# a row's own size before the bound it passes: `sql: 10933 characters; at most 10000 ...`
_OWN_SIZE = re.compile(r"\b\d[\d,]* (\w+)(?=; at most)")


@dataclass(frozen=True)
class RowError:
    """A row ``score_many`` could not score, and why (one line); ``kind``: what was wrong with
    it: ``sql`` (SQL the RAT library cannot read), ``database`` (a database that cannot be read),
    ``type`` (a field of the wrong type), ``value`` (any other field out of bounds) or
    ``internal`` (a bug in rat on this row's SQL: ``rat.errors.InternalError``)."""

    index: int
    message: str
    question_id: str | None = None
    kind: str = "value"

    @property
    def reason(self) -> str:
        """The message without the detail in parentheses and the SQL it quotes, to count rows by:
        ``'cannot parse'``, ``"unsupported construct 'PIVOT'"``, ``'no SQL'``.

        A row's own size in a bound it passes is ``N``, so that such rows are counted together:

        >>> RowError(0, "cannot parse (Invalid expression / Unexpected token at line 1, col 9): 'SELEC x'").reason
        'cannot parse'
        >>> RowError(0, "sql: 10933 characters; at most 10000 are scored").reason
        'sql: N characters; at most 10000 are scored'
        """
        reason = re.split(r" \(|: ['\"]", self.message, maxsplit=1)[0]
        return _OWN_SIZE.sub(r"N \1", reason)[:80]

    def exception(self) -> Exception:
        """What ``Scorer.score`` raises for this row: ``rat.RATError``, ``DatabaseError``,
        ``TypeError``, ``ValueError`` or, for a bug in rat, ``RuntimeError``."""
        error = {"sql": rat.RATError, "database": DatabaseError, "type": TypeError,
                 "internal": RuntimeError}.get(self.kind, ValueError)
        return error(self.message)


class Scorer:
    """A node scorer ready for new, unlabelled queries (no gold): ``Scorer.pretrained()`` or
    ``Scorer.load(path)`` with a ``model=features`` run's ``<run>/model`` directory, or a neural
    run directory / ``.ckpt`` (the neural model has no named features: no reasons, and its
    whole-query confidence is its least confident node, uncalibrated)."""

    def __init__(self, saved: BoostedNodeModel | None = None, neural=None, feature_timeout_s: float = 5.0,
                 max_result_bytes: int = SCORING_RESULT_BYTES):
        """One of ``saved`` (a fitted ``BoostedNodeModel``) or ``neural`` (a neural checkpoint);
        ``feature_timeout_s``: each database read's time limit while scoring;
        ``max_result_bytes``: the memory a query's result may hold when it is run. Most callers
        use ``Scorer.pretrained()`` or ``Scorer.load(path)``, which take both options too."""
        if (saved is None) == (neural is None):
            raise ValueError("Scorer: give one model, a saved boosted model (saved=) or a neural checkpoint "
                             "(neural=); the shipped one with options: Scorer.pretrained(feature_timeout_s=1), "
                             "a saved one: Scorer.load(path, feature_timeout_s=1)")
        if feature_timeout_s is None:
            raise ValueError("feature_timeout_s: expected a positive number of seconds, found None")
        check_seconds(feature_timeout_s, "feature_timeout_s")
        self.saved, self.neural = saved, neural
        self.feature_timeout_s = feature_timeout_s
        self.max_result_bytes = max_result_bytes

    @classmethod
    def pretrained(cls, name: str = "spider", *, feature_timeout_s: float = 5.0,
                   max_result_bytes: int = SCORING_RESULT_BYTES) -> Scorer:
        """The model shipped in the package (``docs/model_card.md``); the options as the
        constructor's."""
        if not isinstance(name, str) or name not in PRETRAINED:
            raise ModelFileError(f"no pretrained model {name!r}; there is: {', '.join(PRETRAINED)}")
        check_seconds(feature_timeout_s, "feature_timeout_s")  # (before the model is read)
        return cls(BoostedNodeModel.load(PRETRAINED[name]), feature_timeout_s=feature_timeout_s,
                   max_result_bytes=max_result_bytes)

    @classmethod
    def load(cls, path: str | Path, *, feature_timeout_s: float = 5.0,
             max_result_bytes: int = SCORING_RESULT_BYTES) -> Scorer:
        """A saved boosted model directory (``<run>/model`` or the run itself), or a neural
        checkpoint (a ``.ckpt`` or a neural run directory); ``pretrained`` for the shipped one,
        ``pretrained:<name>`` for another shipped one (``pretrained:spider_consensus``); the
        options as the constructor's."""
        if not isinstance(path, (str, Path)):
            raise TypeError(f"path: expected a str or Path, found {type(path).__name__}")
        options = {"feature_timeout_s": feature_timeout_s, "max_result_bytes": max_result_bytes}
        check_seconds(feature_timeout_s, "feature_timeout_s")  # (before the model is read)
        if str(path) == "pretrained":
            return cls.pretrained(**options)
        if str(path).startswith("pretrained:"):
            return cls.pretrained(str(path).split(":", 1)[1], **options)
        path = Path(path)
        try:
            found = path.exists()
        except (OSError, ValueError) as e:  # a name too long, a NUL
            raise ModelFileError(f"{str(path)[:80]!r}: not a path that can be read ({e})"[:240]) from None
        if not found:
            raise ModelFileError(f"{path}: no such model (give a <run>/model directory, a neural run "
                                 "or .ckpt, or 'pretrained')")
        for folder in (path, path / "model"):
            if (folder / "model.json").is_file():
                return cls(BoostedNodeModel.load(folder), **options)
        if path.suffix == ".ckpt" or (path / "checkpoints").is_dir() or (path / "metrics.json").is_file():
            from model.nodes.infer import NeuralCheckpoint, resolve_checkpoint

            try:
                checkpoint = resolve_checkpoint(path)
            except FileNotFoundError as e:
                raise ModelFileError(str(e)) from None
            try:
                with warnings.catch_warnings():  # torch's own notes on a refused file: the one line below says it
                    warnings.simplefilter("ignore")
                    return cls(neural=NeuralCheckpoint(checkpoint, device="cpu"), **options)
            except ModelFileError:  # (its own line names the file and what is wrong with it)
                raise
            except (pickle.UnpicklingError, RuntimeError, EOFError, OSError, ValueError, KeyError, TypeError,
                    AttributeError, zipfile.BadZipFile) as e:  # torch.load reads tensors only (weights_only)
                raise ModelFileError(f"{checkpoint}: not a checkpoint this project can read ({type(e).__name__}; "
                                     "only tensors and plain values are loaded, never code)") from None
        raise ModelFileError(f"{path}: neither a saved model (model.json) nor a neural run")

    @property
    def description(self) -> str:
        if self.saved is not None:
            return self.saved.info_.get("method", "boosted node features")
        return "neural node model"

    @property
    def reads_other_answers(self) -> bool:
        """Whether the model reads each query beside the other answers to its question (the
        consensus track: rows sharing a ``question_id``)."""
        from model.nodes.features import CONSENSUS_FEATURES

        return self.saved is not None and bool(set(self.saved.features_) & set(CONSENSUS_FEATURES))

    # ------------------------------------------------------------------------- scoring

    def score(self, sql: str, question: str = "", schema: rat.Schema | Mapping | None = None,
              database: str | Path | None = None, db_id: str | None = None,
              reasons: bool = True, evidence: str = "", dialect: str | None = None,
              timeout_s: float | None = None, max_nodes: int | None = MAX_NODES,
              max_sql_chars: int | None = MAX_SQL_CHARS) -> ScoredQuery:
        """Score one query. Raises ``rat.RATError`` for SQL the RAT library cannot read,
        ``UsageError`` for an unknown ``dialect``, ``model.data.databases.DatabaseError`` for a
        database that cannot be opened or read (a missing file, a file that is not SQLite, one
        locked by a writer) and ``TypeError`` / ``ValueError`` for an argument of the wrong type
        or size, or a schema without tables (given, or read from an empty database: ``schema: no
        tables``, not every query scored near 0). ``database``: a SQLite file, a URL
        (``postgresql://user:pw@host/db``, ``mysql+pymysql://..``, ``duckdb:///file.duckdb``,
        ``sqlite:///file.sqlite``), an open connection (psycopg, pymysql, duckdb, sqlite3), an
        SQLAlchemy engine or a ``model.data.databases.Database``; opened read-only (a SQLite file's
        connection is kept for the next call in this thread, at most 8 a thread). Without a
        ``schema``, the schema is read from the database. ``evidence``: BIRD-style external knowledge,
        read as part of the question; ``dialect``: the SQL dialect ``sql`` is written in (default:
        the database's own, ``postgres`` for a PostgreSQL URL; ``sqlite`` without a database);
        ``timeout_s``: the most seconds the call may take (each database read is bounded by
        ``feature_timeout_s`` anyway), past which it raises ``model.data.execution.DeadlineExceeded``
        (a ``TimeoutError``). ``max_nodes`` / ``max_sql_chars``: as ``score_many`` bounds a query
        (None: no bound)."""
        import time

        check_seconds(timeout_s)
        (result,) = self.score_many([{"sql": sql, "question": question, "schema": schema,
                                      "database": database, "db_id": db_id, "evidence": evidence}],
                                    progress=False, reasons=reasons, dialect=dialect, label_shift=False,
                                    deadline=None if timeout_s is None else time.monotonic() + timeout_s,
                                    max_nodes=max_nodes, max_sql_chars=max_sql_chars)
        if isinstance(result, RowError):
            raise result.exception()
        return result

    def choose(self, candidates: Sequence[str], question: str = "", schema: rat.Schema | Mapping | None = None,
               database: str | Path | None = None, db_id: str | None = None, evidence: str = "",
               dialect: str | None = None, rule: str = "most common tree", **options):
        """Of several queries for one question (a model's samples, several systems' answers), the
        one ``rule`` chooses (``model.scoring.choice.RULES``): ``"most common tree"`` (default),
        the one whose canonical tree the most candidates share, ties to the more confident, or
        ``"most confident"`` (docs/scoring.md, "Choosing among candidates", measures both). A
        model that reads each query beside the other answers (``reads_other_answers``:
        ``pretrained:spider_consensus``) scores the candidates as answers to one question. A ``Choice``: the chosen
        ``index``, every candidate's ``ScoredQuery`` (``scored``; a candidate that cannot be
        scored is its ``RowError``, left out of the choice) and how many share the chosen tree
        (``agreeing``). At most ``model.scoring.choice.MAX_CANDIDATES`` candidates (64; more: a
        ``ValueError``, before any work). Raises what ``score`` raises for the first candidate when
        none can be scored. ``options`` go to ``score_many`` (``deadline``, ``max_nodes``, ...).

        >>> choice = Scorer.pretrained().choose(
        ...     ["SELECT name FROM singer WHERE age > 20", "SELECT T1.name FROM singer AS T1 WHERE 20 < T1.age",
        ...      "SELECT name FROM singer", "SELEC name"],
        ...     question="Names of singers older than 20?", schema={"singer": ["singer_id", "name", "age"]})
        >>> choice.index, choice.agreeing, type(choice.scored[3]).__name__
        (0, 2, 'RowError')
        """
        from model.scoring.choice import CANDIDATES, check_rule, choice_of

        if isinstance(candidates, str) or not isinstance(candidates, Sequence) or not candidates:
            raise TypeError("candidates: expected a non-empty list of SQL strings")
        if len(candidates) > MAX_CANDIDATES:
            raise ValueError(f"candidates: {len(candidates)} queries; at most {MAX_CANDIDATES}")
        if (k := next((k for k, sql in enumerate(candidates) if not isinstance(sql, str)), None)) is not None:
            raise TypeError(f"candidates[{k}]: expected a str of SQL, found {type(candidates[k]).__name__}")
        check_rule(rule)  # (before the work)
        rows = [{"sql": sql, "question": question, "schema": schema, "database": database, "db_id": db_id,
                 "evidence": evidence, "question_id": CANDIDATES} for sql in candidates]
        scored = self.score_many(rows, dialect=dialect, **{"progress": False, "reasons": True, **options})
        choice = choice_of(scored, rule)
        if choice is None:
            raise scored[0].exception()
        return choice

    @property
    def policy(self):
        """The saved model's run / review / regenerate ``model.scoring.verdict.Policy``, or None."""
        from model.scoring.verdict import Policy

        saved = self.saved.info_.get("policy") if self.saved is not None else None
        return Policy.from_dict(saved) if saved is not None else None

    def check(self, sql: str, question: str = "", schema: rat.Schema | Mapping | None = None,
              database: str | Path | None = None, db_id: str | None = None, dialect: str | None = None,
              evidence: str = "", policy=None, timeout_s: float | None = None, max_nodes: int | None = MAX_NODES,
              max_sql_chars: int | None = MAX_SQL_CHARS):
        """Score one query and decide what to do with it: a ``model.scoring.verdict.Verdict``
        (run | review | regenerate, with feedback a text-to-SQL model can act on), by ``policy``
        (default: the one saved with the model; ``UsageError`` when it has none); ``timeout_s``
        bounds the scoring as in ``score``, and ``max_nodes`` / ``max_sql_chars`` the query."""
        from model.scoring.verdict import verdict_of

        policy = self._chosen_policy(policy)
        scored = self.score(sql, question=question, schema=schema, database=database, db_id=db_id,
                            evidence=evidence, dialect=dialect, timeout_s=timeout_s, max_nodes=max_nodes,
                            max_sql_chars=max_sql_chars)
        return verdict_of(scored, policy, database)

    def check_many(self, rows: Iterable[Mapping], policy=None, **options) -> list:
        """``check`` for each row of ``score_many`` (with its ``options``), in order: a ``Verdict``,
        or the ``RowError`` of a row that could not be scored; a verdict's literals are looked up
        in its row's ``database``, and ``options``' ``deadline`` holds between verdicts too."""
        from model.data.execution import check_deadline
        from model.scoring.verdict import verdict_of

        policy = self._chosen_policy(policy)
        _check_rows(rows)
        rows = list(rows)
        results = self.score_many(rows, reasons=True, **{"progress": False, **options})
        out: list = []
        for row, result in zip(rows, results):
            check_deadline(options.get("deadline"))
            out.append(result if isinstance(result, RowError) else verdict_of(result, policy, row.get("database")))
        return out

    def _chosen_policy(self, policy):
        """``policy``, else the model's; ``UsageError`` when there is none."""
        from model.nodes.policy import Policy

        policy = policy if policy is not None else self.policy
        if policy is not None and not isinstance(policy, Policy):
            raise TypeError(f"policy: expected a model.scoring.verdict.Policy, found {type(policy).__name__}")
        if policy is None:
            raise UsageError(f"the model ({self.description}) has no policy saved; choose one with "
                             "python -m model.scoring.policy, or pass policy=")
        return policy

    def score_many(self, rows: Iterable[Mapping], progress: bool = True, reasons: bool = False,
                   spans: bool = True, batch_size: int = 256, workers: int | None = None,
                   features: Sequence[str] | None = None, quantiles: str = "model",
                   deadline: float | None = None, max_nodes: int | None = MAX_NODES,
                   max_sql_chars: int | None = MAX_SQL_CHARS, dialect: str | None = None,
                   label_shift: bool | None = False) -> list[ScoredQuery | RowError]:
        """Score rows ``{sql, question, evidence, schema, database, db_id, question_id}`` (all but
        ``sql`` optional; BIRD's ``evidence`` is read as part of the question), in order; a row that cannot be scored comes back as a ``RowError``, never
        stops the batch. ``progress``: True, a bar of its own; or a caller's tqdm bar (anything
        with ``update(n)``), moved by the rows as they are scored (one bar over several calls).
        ``reasons`` adds reasons to low-confidence nodes; ``spans`` locates
        every node in the written SQL. ``workers`` processes read the SQL and compute the
        features of a boosted model's batches (default: one per CPU core, up to 4, when there is
        more than one batch; called off the main thread, none: a fork copies the locks other
        threads hold, and a worker could wait on one forever); the model itself runs in this
        process. ``features``: the feature
        columns each result's ``features`` holds (default: the model's own), e.g. another
        model's, computed in the same pass (``model.scoring.adapt``). ``quantiles``, for a model
        that reads its count features as quantiles (``model.quantiles``): ``"model"`` reads them
        against the nodes it was trained on, ``"rows"`` against the scored rows' own nodes (all
        of them, read before any is scored: outputs of another benchmark or domain, where the
        training benchmark's sizes do not hold; no labels are read). ``deadline``
        (``time.monotonic()``): the work checks it as it goes (each row, each database read, before
        the model and the reasons) and raises ``model.data.execution.DeadlineExceeded`` once it has
        passed; ``max_nodes`` / ``max_sql_chars`` (``MAX_NODES``, 500, and ``MAX_SQL_CHARS``, 10,000,
        by default; None: no bound): a query whose tree has more nodes,
        or whose SQL more characters, is a ``RowError``, not scored: each row's cost is bounded;
        so is each answer of a question past ``model.scoring.choice.MAX_CANDIDATES`` (64) answers
        for a model that reads the other answers (``reads_other_answers``).
        ``dialect``: the SQL dialect of rows without their own ``dialect`` field (``rat.DIALECTS``;
        an unknown name is a ``UsageError``, a row's own unknown one a ``RowError``; None, the
        default: each row's database's own, ``sqlite`` for a row without one). With a
        database, SQL of another dialect runs as sqlglot writes it for the database's own
        (``model.data.execution.runnable_sql``). A row's ``database`` is anything ``score``
        takes; each distinct one is opened once per call, read-only, and closed before this
        returns (a connection or ``Database`` passed in stays open); a row without a schema gets
        its database's. ``label_shift``: the rows are read as one file
        and every whole-query confidence is moved to the share of right queries EM estimates on
        them (``model.label_shift``; each result's ``label_shift`` holds the estimate and its
        interval, ``unshifted_confidence`` the confidence before); None does it for
        ``model.label_shift.MIN_QUERIES`` or more scored queries, True for any number, False
        (default) never: measured on Spider's systems, the shift moved the confidences further
        from each system's rate than they were (docs/results.md, 'Rates without labels'). Node
        confidences are not moved; nor is anything for a model whose card lacks the rate it was
        calibrated at (the neural model, an adapted one), nor where the estimate reaches 0 or 1."""
        dialect = dialect_name(dialect) if dialect is not None else None
        _check_rows(rows)
        _check_options(progress=progress, reasons=reasons, spans=spans, label_shift=label_shift, deadline=deadline,
                       features=features)
        for name, value, optional in (("batch_size", batch_size, False), ("max_nodes", max_nodes, True),
                                      ("max_sql_chars", max_sql_chars, True), ("workers", workers, True)):
            if not (optional and value is None) and (isinstance(value, bool) or not isinstance(value, int)
                                                     or value < 1):
                raise ValueError(f"{name}: expected a positive whole number{' or None' if optional else ''}, "
                                 f"found {value!r}"[:200])
        rows = list(rows)
        if features is not None and self.saved is None:
            raise ValueError("features: the neural model has no named features")
        if quantiles not in ("model", "rows"):
            raise ValueError(f"quantiles must be 'model' or 'rows'; found {quantiles!r}")
        rows, opened = self._open_databases(rows)
        try:
            if any(isinstance(r.get("database"), Database) and not isinstance(r["database"], SqliteDatabase)
                   for r in rows if isinstance(r, Mapping)):
                workers = 1  # a connection is not shared with forked workers
            with _heap_frozen() if len(rows) > FREEZE_ROWS else nullcontext():
                results = self._score_all(rows, progress, reasons, spans, batch_size, workers,
                                          tuple(features) if features is not None else None,
                                          quantiles == "rows", _Budget(deadline, max_nodes, max_sql_chars), dialect)
        finally:
            for db in opened:
                db.close()
        if label_shift is not False:
            from model.label_shift import shift_scored

            scored = [r for r in results if isinstance(r, ScoredQuery)]
            found = shift_scored(scored, self.saved, 1 if label_shift else None)
            if found is not None and not found.fits:  # estimated, not moved: each result holds it (fits False)
                for r in scored:
                    r.label_shift, r.unshifted_confidence = found, r.query_confidence
        return results

    def _open_databases(self, rows: list[Mapping]) -> tuple[list[Mapping], list[Database]]:
        """The rows with each ``database`` that is a URL, a DuckDB file or a connection opened
        (``model.data.databases.open_database``: once per distinct database, read-only), and
        the schema read from its database where a row gives none; and the databases opened here,
        for the caller to close. A SQLite path stays a path, once it has been read. A database
        that cannot be opened or read (a missing file, a file that is not SQLite, one locked by a
        writer, a URL that does not connect) makes each of its rows a ``RowError`` naming it."""
        opened: list[Database] = []
        by_target: dict[object, Database | Path | DatabaseError] = {}
        schemas: dict[int, rat.Schema | DatabaseError] = {}
        out = []
        try:
            for row in rows:
                target = row.get("database") if isinstance(row, Mapping) else None
                if target is None or isinstance(target, str) and target == "":
                    out.append(row)
                    continue
                key = str(target) if isinstance(target, (str, Path)) else id(target)
                if key not in by_target:
                    try:
                        by_target[key] = self._open_database(target, opened)
                    except DatabaseError as error:
                        by_target[key] = error
                database = by_target[key]
                if not isinstance(database, DatabaseError) and row.get("schema") is None:
                    if id(database) not in schemas:
                        reader = database if isinstance(database, Database) else SqliteDatabase(
                            database, timeout_s=self.feature_timeout_s, max_rows=1,
                            max_result_bytes=self.max_result_bytes)
                        try:
                            schemas[id(database)] = reader.schema(str(row.get("db_id") or ""))
                        except DatabaseError as error:
                            schemas[id(database)] = error
                    row = {**row, "schema": schemas[id(database)]}
                    database = row["schema"] if isinstance(row["schema"], DatabaseError) else database
                out.append({**row, "database": None, _DATABASE_PROBLEM: str(database)}
                           if isinstance(database, DatabaseError) else {**row, "database": database})
        except BaseException:
            for db in opened:
                db.close()
            raise
        return out, opened

    def _open_database(self, target: object, opened: list[Database]) -> Database | Path:
        """``target`` ready to read: a ``Database`` as it is, a SQLite path once a read of it
        has succeeded, anything else opened (and added to ``opened``); ``DatabaseError`` otherwise."""
        if isinstance(target, Database):
            return target
        if is_sqlite_path(target):
            path = Path(target)
            if (problem := sqlite_problem(path, self.feature_timeout_s)) is not None:
                raise DatabaseError(f"{path}: {problem}")
            return path
        database = open_database(target, timeout_s=self.feature_timeout_s, max_result_bytes=self.max_result_bytes)
        opened.append(database)
        return database

    def _score_all(self, rows: list[Mapping], progress: bool, reasons: bool, spans: bool, batch_size: int,
                   workers: int | None, features: tuple[str, ...] | None = None, own_quantiles: bool = False,
                   budget: _Budget | None = None, dialect: str | None = None) -> list[ScoredQuery | RowError]:
        from tqdm.auto import tqdm

        batches = self._batches(rows, batch_size)
        workers = _worker_count(workers, len(batches)) if self.saved is not None else 1
        if workers > 1 and any(isinstance(row.get("database"), Database) for row in rows if isinstance(row, Mapping)):
            workers = 1  # an open connection is neither sent to forked processes nor shared with them
        # no bar object without progress: even a disabled one costs a request ~10 us
        own = not _is_bar(progress) and bool(progress)  # (bool() of a tqdm bar may raise)
        bar = tqdm(total=len(rows), desc="scoring", unit="query", leave=False) if own else \
            progress if _is_bar(progress) else None
        out: list[ScoredQuery | RowError | None] = [None] * len(rows)
        jobs = [([rows[i] for i in positions], positions, spans, features, budget, dialect)
                for positions in batches]
        reference = self.saved.quantiles_ if self.saved is not None else None
        with _prepared_batches(self, jobs, workers) as prepared:
            if reference is not None and own_quantiles:  # every row's features first: the rows' own reference
                from model.nodes.quantiles import Quantiles

                prepared = list(prepared)
                columns = len(self.saved.features_)
                matrices = [m[:, :columns] for batch in prepared for m in batch.features]
                if matrices:
                    reference = Quantiles.fit(np.vstack(matrices), self.saved.features_, reference.features)
            for (chunk, positions, *_), batch in zip(jobs, prepared):
                for i, result in zip(positions, self._finish(batch, chunk, reasons, reference, budget)):
                    out[i] = result
                if bar is not None:
                    bar.update(len(chunk))
        if own:
            bar.close()
        return out  # type: ignore[return-value]

    def _batches(self, rows: Sequence[Mapping], batch_size: int) -> list[list[int]]:
        """Row positions, ``batch_size`` at a time, in order; for a model that reads other
        systems' answers (the consensus track) every row of a question (same ``question_id``)
        lands in the same batch, whatever the input order."""
        if not self.reads_other_answers:
            return [list(range(start, min(start + batch_size, len(rows)))) for start in range(0, len(rows), batch_size)]
        groups: dict[object, list[int]] = {}
        for i, row in enumerate(rows):
            qid = row.get("question_id") if isinstance(row, Mapping) else None
            groups.setdefault(i if qid is None else ("q", str(qid)), []).append(i)
        batches: list[list[int]] = [[]]
        for group in groups.values():
            if batches[-1] and len(batches[-1]) + len(group) > batch_size:
                batches.append([])
            batches[-1].extend(group)
        return [b for b in batches if b]

    def _prepare(self, rows: Sequence[Mapping], positions: Sequence[int], spans: bool,
                 features: tuple[str, ...] | None = None, budget: _Budget | None = None,
                 dialect: str | None = None) -> _Batch:
        """Read the rows' SQL into examples and (boosted) their feature matrices (the model's
        columns, then any other of ``features``) and (``spans``) their nodes' spans in the
        written SQL; pure Python and read-only database reads, so it runs in worker processes.
        ``dialect``: that of rows without their own ``dialect`` (None: their database's own)."""
        from model.data.datasets import Question, question_text
        from model.nodes.examples import make_example
        from model.nodes.outputs import tree_of

        budget = budget or _Budget()
        batch = _Batch([None] * len(rows), [], [], {}, {}, list(positions))
        # a model that reads the other answers compares each answer of a question with every other
        answers = Counter(str(r.get("question_id")) for r in rows if isinstance(r, Mapping)
                          and r.get("question_id") is not None) if self.reads_other_answers else Counter()
        for j, row in enumerate(rows):
            check_deadline(budget.deadline)
            qid = row.get("question_id") if isinstance(row, Mapping) else None
            database, read_as = None, dialect or "sqlite"
            try:
                if not isinstance(row, Mapping):
                    raise TypeError(f"expected a row (a mapping with 'sql'), found {type(row).__name__}")
                if row.get(_DATABASE_PROBLEM):
                    raise DatabaseError(row[_DATABASE_PROBLEM])
                if problem := next(filter(None, (type_problem(name, row.get(name)) for name in ROW_FIELDS
                                                 if name != "database")), None):
                    raise TypeError(problem)  # (before any work: a db_id of bytes, a question_id of a list)
                if problem := misspelt_field(row, (*ROW_FIELDS, "schema")):
                    raise ValueError(problem)  # (``databse``: not scored as if no database were given)
                if qid is not None and answers[str(qid)] > MAX_CANDIDATES:
                    raise ValueError(f"question_id {str(qid)[:80]!r}: {answers[str(qid)]} answers to one question; "
                                     f"a model that reads the other answers takes at most {MAX_CANDIDATES}")
                sql = row.get("sql")
                if not sql or not sql.strip():
                    raise ValueError("no SQL")
                if budget.max_sql_chars is not None and len(sql) > budget.max_sql_chars:
                    raise ValueError(f"sql: {len(sql)} characters; at most {budget.max_sql_chars} are scored")
                for name in ("question", "evidence"):
                    if problem := question_problem(name, row.get(name) or ""):
                        raise ValueError(problem)
                name = str(row.get("db_id") or f"schema{j}")
                schema = rat.Schema.of(row.get("schema"), name)
                if schema is not None and not schema.tables:  # (a schema that failed to load: all near 0)
                    raise ValueError("schema: no tables")
                database = row.get("database")
                database = database if isinstance(database, Database) else Path(database) if database else None
                # not sent there (it writes, locks..): counted as refused, not as a query that fails to run
                refused = refusal(sql, database.dialect) if isinstance(database, Database) else None
                key = _schema_key(name, j, schema, database, batch)
                own = database.dialect if isinstance(database, Database) else "sqlite"
                read_as = dialect_name(row["dialect"]) if row.get("dialect") is not None else dialect or own
                try:  # tree and spans: one parse (which reads nothing from the database)
                    located = rat.sql_spans(sql, None, schema, read_as) if spans else None
                    example = make_example(Question(str(qid or f"q{positions[j]}"), key,
                                                    question_text(str(row.get("question") or ""),
                                                                  str(row.get("evidence") or "")), ""),
                                           sql, str(row.get("system") or "user"), schema,
                                           tree=located.tree if located else None, dialect=read_as)
                except (rat.RATError, InternalError) as e:
                    # SQL that does not parse is said so, as without a database (`SELEC a` was
                    # refused as if it wrote); a statement that writes stays refused
                    if refused and not isinstance(e, rat.ParseError):
                        raise ValueError(refused) from None
                    raise
                if refused:
                    raise ValueError(refused)
                if budget.max_nodes is not None and len(example.node_names) > budget.max_nodes:
                    raise ValueError(f"the query has {len(example.node_names)} nodes; at most "
                                     f"{budget.max_nodes} are scored")
            except (rat.RATError, InternalError, ValueError, TypeError) as e:  # (a bug in rat: this row alone)
                kind = ("database" if isinstance(e, DatabaseError) else "sql" if isinstance(e, rat.RATError)
                        else "internal" if isinstance(e, InternalError)
                        else "type" if isinstance(e, TypeError) else "value")
                message = str(e).splitlines()[0] if str(e) else type(e).__name__
                own = database.dialect if isinstance(database, Database) else "sqlite" if database else None
                if kind == "sql" and own not in (None, read_as):  # SQL of the database's own dialect?
                    message += f" (read as {read_as} SQL; the database is {own}: dialect {own!r} reads its own)"
                batch.errors[j] = RowError(positions[j], message, qid, kind)
                continue
            batch.schemas[key] = schema
            batch.databases[key] = database
            batch.examples.append(example)
            batch.dialects.append(read_as)
            batch.keys.append(j)
            if located is not None:  # a tree sql_spans could not map is rebuilt from the example, not parsed again
                batch.trees.append(located.tree if located.tree is not None else tree_of(
                    {"node_names": example.node_names, "node_arity": example.node_arity}))
                batch.spans.append(_written(located, sql, read_as))
        if self.saved is not None and batch.examples:
            batch.features, batch.execution_errors, batch.columns_holding = self._features(
                batch.examples, batch.schemas, batch.databases, features or (), budget.deadline, batch.dialects)
            batch.columns = features
        return batch

    def _finish(self, batch: _Batch, rows: Sequence[Mapping], reasons: bool, quantiles=None,
                budget: _Budget | None = None) -> list[ScoredQuery | RowError]:
        results: list[ScoredQuery | RowError | None] = list(batch.errors)
        if batch.examples:
            model_columns = len(self.saved.features_) if self.saved is not None else 0
            databases = [readable_database(batch.databases.get(e.db_id)) for e in batch.examples]
            if quantiles is not None:  # count features read as quantiles (model.quantiles)
                names = self._column_order(batch.columns or ())
                batch.features = [quantiles.transform(m, names) for m in batch.features]
            matrices = [m[:, :model_columns] for m in batch.features]
            deadline = budget.deadline if budget is not None else None
            check_deadline(deadline)
            schemas = [batch.schemas.get(e.db_id) for e in batch.examples]
            errors = batch.execution_errors or [None] * len(batch.examples)
            scored = (self._boosted(batch.examples, matrices, reasons, databases, schemas, errors, deadline)
                      if self.saved is not None else self._neural(batch.examples))
            for k, (j, example, (conf, site, query_conf, why, x)) in enumerate(zip(batch.keys, batch.examples, scored)):
                row = rows[j]
                if conf is None:
                    results[j] = RowError(batch.positions[j], "too long for the neural model",
                                          row.get("question_id"))
                    continue
                results[j] = _assemble(example, row, batch.schemas[example.db_id], conf, site, query_conf,
                                       why, batch.trees[k] if batch.trees else None,
                                       batch.spans[k] if batch.spans else None, batch.dialects[k])
                results[j].with_database = bool(databases[k])
                results[j].execution_error = errors[k]
                if batch.columns_holding:
                    results[j].columns_holding = batch.columns_holding[k]
                if self.saved is not None:
                    results[j].look_here_reliability = self._reliability(
                        results[j].nodes[results[j].look_here_first].site_score, databases[k])
                    if "kind" in self.saved.features_:
                        from model.nodes.features import known_kind

                        for node in results[j].nodes:
                            node.unfamiliar = not known_kind(node.kind)
                results[j].features = x if batch.columns is None else batch.features[k][:, self._columns(batch.columns)]
        return results  # type: ignore[return-value]

    def _reliability(self, site_score: float, with_database) -> float | None:
        """Out of fold, the top-1 of the pointers whose site score fell in ``site_score``'s bin
        (``model.eval.localisation.pointer_reliability``, saved by the training run), for rows
        scored with or without a database; None when the model saved none or the bin was empty."""
        from model.metrics import pointer_rate

        saved = self.saved.info_.get("pointer_reliability") or {}
        bins = saved.get("with_database" if with_database or "without_database" not in saved else "without_database")
        return pointer_rate(bins or [], site_score)

    def _columns(self, features: Sequence[str]) -> list[int]:
        """Where ``features`` are in the matrices ``_features`` computes with them."""
        order = self._column_order(features)
        return [order.index(n) for n in features]

    def _column_order(self, extra: Sequence[str]) -> list[str]:
        """The columns of the matrices ``_features`` computes: the model's, then those of
        ``extra`` the model does not read."""
        return list(self.saved.features_) + [n for n in extra if n not in self.saved.features_]

    def _features(self, examples: list, schemas: dict, databases: dict, extra: Sequence[str] = (),
                  deadline: float | None = None, dialects: Sequence[str] | None = None
                  ) -> tuple[list[np.ndarray], list[str | None], list[dict]]:
        """Each example's matrix of the saved model's features, in the model's column order,
        then the columns of ``extra`` the model does not read; why each query did not run on its
        database (None where it ran or had none); and the other columns its literals were found
        in (``FeatureReport.columns_holding``)."""
        from model.nodes.features import CONSENSUS_FEATURES, LM_FEATURES, build_features

        wanted = set(self.saved.features_) | set(extra)
        matrices, names, report = build_features(
            examples, schemas, databases, consensus=bool(wanted & set(CONSENSUS_FEATURES)),
            use_cache=False, timeout_s=self.feature_timeout_s, progress=False, deadline=deadline,
            max_result_bytes=self.max_result_bytes, dialects=dialects,
            lm=(self.saved.info_.get("config", {}).get("lm") or True) if wanted & set(LM_FEATURES) else False,
            semantic=any(n.startswith(("name_semantic", "subtree_min_sem")) for n in wanted))
        index = {n: j for j, n in enumerate(names)}
        order = self._column_order(extra)
        missing = [n for n in order if n not in index]
        if missing:
            raise ModelFileError(f"the model reads features this version does not compute: {missing}")
        columns = [index[n] for n in order]
        return [m[:, columns] for m in matrices], report.execution_errors, report.columns_holding

    def _boosted(self, examples: list, matrices: list[np.ndarray], reasons: bool, with_database: list[bool],
                 schemas: list, errors: list, deadline: float | None = None) -> list[tuple]:
        saved = self.saved
        x_all = np.vstack(matrices)
        raw_all = saved.raw_node_probability(x_all)
        site_all = saved.site_score(x_all, raw_all, [e.node_arity for e in examples])
        sizes = np.cumsum([len(m) for m in matrices])[:-1]
        out = []
        for e, x, raw, site, database, schema, error in zip(
                examples, matrices, np.split(raw_all, sizes), np.split(site_all, sizes), with_database,
                schemas, errors):
            conf, query_conf = saved.confidences(raw, database)
            why: dict[int, list[Reason]] = {}
            if reasons:
                check_deadline(deadline, "reasons")
                look = int(np.nanargmax(site)) if not np.isnan(site).all() else int(np.argmin(conf))
                least = np.argsort(conf, kind="stable")[:REASON_NODES]
                low = sorted({int(i) for i in least if conf[i] < REASONS_BELOW} | {look})
                why = explain_nodes(saved, x, low, _contexts(e, schema, error),
                                    [kind_group(t) for t in e.node_types], conf, database,
                                    functools.cache(functools.partial(best_matches, e.question, schema)))
            out.append((conf, site, float(query_conf), why, x))
        return out

    def _neural(self, examples: list) -> list[tuple]:
        from rat.walks import site_reading

        out = []
        for e, conf in zip(examples, self.neural.score_examples(examples, progress=False)):
            if conf is None:
                out.append((None, None, None, {}, None))
                continue
            conf = np.asarray(conf)
            out.append((conf, np.asarray(site_reading(conf, e.node_arity)), float(conf.min()), {}, None))
        return out


def _contexts(example, schema: rat.Schema | None = None, execution_error: str | None = None
              ) -> list[ReasonContext]:
    """What each node's reasons may name: its label, and for a literal the compared column; a
    column as the schema names it (a self-join's `suppliers_2.name` is `suppliers.name`); why
    the query did not run.

    >>> from model.nodes.examples import NodeExample
    >>> nodes = list(rat.to_tree("SELECT b.name FROM suppliers a JOIN suppliers b ON a.id = b.boss "
    ...                          "WHERE b.name = 'x'").postorder())
    >>> kinds = [k if k in ("table", "column", "value") else n.label
    ...          for k, n in ((rat.node_kind(n), n) for n in nodes)]
    >>> e = NodeExample("q", "db", "s", "", "", [], [], kinds, None,
    ...                 node_names=[n.label for n in nodes], node_arity=[len(n.children) for n in nodes])
    >>> contexts = _contexts(e, rat.Schema({"suppliers": ["id", "boss", "name"]}))
    >>> [c.label for c in contexts if c.kind == "column"], contexts[2].compared_column
    (['suppliers.name', 'suppliers.name', 'suppliers.id', 'suppliers.boss'], 'suppliers.name')
    """
    from model.nodes.features import COMPARISONS, tree_shape

    shape = tree_shape(example.node_arity)
    names, kinds = example.node_names, example.node_types

    def named(label: str) -> str:
        return (schema.source(label) or label) if schema is not None else label

    out = []
    for i, (name, kind) in enumerate(zip(names, kinds)):
        column = None
        if kind == "value":
            p = shape.parent[i]
            if p >= 0 and kinds[p] in COMPARISONS:
                columns = [names[c] for c in shape.children[p] if kinds[c] == "column"]
                column = named(columns[0]) if len(columns) == 1 else None
            name = literal_of(name)
        elif kind == "column":
            name = named(name)
        out.append(ReasonContext(label=name, kind=kind, compared_column=column,
                                 execution_error=execution_error))
    return out


def written_spans(sql: str, tree: rat.Node, schema: rat.Schema | None,
                  dialect: str = "sqlite") -> list[tuple[int, int] | None]:
    """Each post-order node's span in ``sql`` as written: ``rat.sql_spans`` locates nodes in the
    canonical SQL, whose words are matched to the written words (aliases, case and spacing differ).

    >>> sql = "SELECT T1.name FROM singer AS T1 WHERE T1.age > 20"
    >>> [sql[s:e] for s, e in written_spans(sql, rat.to_tree(sql), None)][:4]
    ['T1.name', 'T1.age', '20', 'T1.age > 20']
    >>> sql = "SELECT name FROM singer JOIN concert USING (singer_id)"
    >>> sql[slice(*written_spans(sql, rat.to_tree(sql), None)[-2])]
    'FROM singer JOIN concert USING (singer_id)'
    """
    return _written(rat.sql_spans(sql, tree, schema, dialect), sql, dialect)


def _written(located: rat.SqlSpans, sql: str, dialect: str = "sqlite") -> list[tuple[int, int] | None]:
    """Each span of ``located`` (in its canonical SQL) in ``sql`` as written: the hull of the
    written words its canonical words match. A run of canonical words without written ones stands
    for the written words between its neighbours' (`singer.country` of `GROUP BY 1`, whose
    ordinal rat replaced by the output it names, is the `1`; a parameter `$1` that the canonical
    text quotes, `"$1"`, is the written `$1`): in the span of a node that holds the whole run, and
    of one whose words lie in a run that is a node's words (the `*` of `count(*)` that `ORDER BY 2`
    names), not of one that shares only some words with it, nor in a run no node's words make up
    (where the words' diff lost its way, there is no telling what stands for what). A negated
    predicate is matched in the order it is written (`_negations_as_written`), a parenthesis the
    canonical SQL opens where none is written is no word of a run, and the two comparisons of a
    BETWEEN share its written operand (`_between_as_written`).

    >>> sql = "SELECT country, count(*) FROM singer GROUP BY 1 ORDER BY 2 DESC"
    >>> [sql[s:e] for s, e in _written(rat.sql_spans(sql), sql)][:6]
    ['2', '2', 'country', '*', 'count(*)', '1']
    """
    canonical, spans, (canonical_words, match, written_words) = _negations_as_written(located, sql, dialect)
    comments, canonical_comments = _comments(sql, dialect), _comments(canonical, dialect)
    # a word of a comment is no node's text (`GROUP BY 1 -- by country`), nor part of a run
    skip = {k for k, (start, _) in enumerate(canonical_words) if _in_comment(start, canonical_comments)}
    # nor is a parenthesis the canonical SQL opens where none is written, before words of its own
    # (`where (x >= 1 and x <= 5) or ..` of a BETWEEN in an OR: `x` is the written word, not `(x`)
    skip |= {k for k, (start, end) in enumerate(canonical_words) if canonical[start:end] == "(" and match[k] is None
             and (k == 0 or match[k - 1] is not None) and k + 1 < len(match) and match[k + 1] is None}
    if comments or skip:
        match = [None if j is None or k in skip or _not_code(written_words[j], comments) else j
                 for k, j in enumerate(match)]
    runs = _unmatched_runs(match, written_words, comments, skip)
    starts = [ws for ws, _ in canonical_words]  # in text order: a span's words are a run of them
    node_words = [None if span is None else _words_in(canonical_words, starts, span) for span in spans]
    nodes_runs = set(node_words)
    out: list[tuple[int, int] | None] = []
    for span, words in zip(spans, node_words):
        if span is None:
            out.append(None)
            continue
        (start, end), first, last = words, None, None
        for k in range(start, end):
            j = match[k]
            if j is not None:
                written = written_words[j][1:]
            elif runs[k] is None:  # (a comment's)
                continue
            else:
                run_start, run_end, written = runs[k]
                if not (start <= run_start and run_end <= end
                        or (run_start, run_end) in nodes_runs and run_start <= start and end <= run_end):
                    continue
            if written is not None:
                first = written[0] if first is None else min(first, written[0])
                last = written[1] if last is None else max(last, written[1])
        out.append(None if first is None else _closed(sql, first, last))
    return _between_as_written(located, out, sql)


# the comparisons rat spells `x BETWEEN a AND b` as (under an And), and `x NOT BETWEEN a AND b`
# (under an Or): the lower bound's, then the upper's
_BETWEEN = {"And": ("Gte", "Lte"), "Or": ("Lt", "Gt")}


def _between_as_written(located: rat.SqlSpans, out: list[tuple[int, int] | None], sql: str
                        ) -> list[tuple[int, int] | None]:
    """``out`` (each node's written span) with `x BETWEEN a AND b` and `x NOT BETWEEN a AND b`,
    which rat spells as two comparisons (`x >= a and x <= b`, `x < a or x > b`) with a copy of `x`
    each, read as written: the second copy of `x` (no words of its own) is the written `x`, node
    for node, and each comparison spans its operand to its bound, the lower one `x BETWEEN a`, the
    upper one `x BETWEEN a AND b` (the text that holds both; written so, the comparisons share
    it). Two comparisons written out (`x >= a AND x <= b`) are left as they are.

    >>> sql = "SELECT name FROM singer AS s WHERE s.age BETWEEN 1 AND 5"
    >>> [sql[slice(*s)] for s in written_spans(sql, rat.to_tree(sql), None)][1:7]
    ['s.age', '1', 's.age BETWEEN 1', 's.age', '5', 's.age BETWEEN 1 AND 5']
    """
    nodes = located.tree.postorder() if located.tree is not None else []
    if len(nodes) != len(out):
        return out
    index = {id(node): i for i, node in enumerate(nodes)}
    for node in nodes:
        kinds = _BETWEEN.get(node.label)
        if kinds is None:
            continue
        for lower, upper in zip(node.children, node.children[1:]):
            if (lower.label, upper.label) != kinds or len(lower.children) != 2 or len(upper.children) != 2 \
                    or lower.children[0] != upper.children[0]:
                continue
            operand, bound, copy = (index[id(c)] for c in (*lower.children, upper.children[0]))
            written, bounds = out[operand], (out[bound], out[index[id(upper.children[1])]])
            if written is None or None in bounds or not re.search(r"(?i)\bbetween\b", sql[written[1]:bounds[0][0]]):
                continue
            size = len(lower.children[0].postorder())  # (the copies' nodes, in post-order alike)
            out[copy - size + 1:copy + 1] = out[operand - size + 1:operand + 1]
            out[index[id(lower)]] = (written[0], bounds[0][1])
            out[index[id(upper)]] = (written[0], bounds[1][1])
    return out


def _negations_as_written(located: rat.SqlSpans, sql: str, dialect: str = "sqlite"):
    """The canonical text and node spans of ``located``, with the words of ``sql`` matched to that
    text (``written_word_of``). The canonical SQL writes `x NOT IN (..)` as `not x in (..)` (SQLite's
    `x IS NOT NULL` as `not x is null`, `x NOT GLOB p` as `not x glob p`; PostgreSQL's and MySQL's
    `x IS NOT y` as `not x is y`, a Not over an Is), words in another order than written, which the
    words' diff cannot match: the `not` of each such predicate is put after its left operand,
    `x not in (..)`, or after the `is` that follows it, `x is not y`, where that matches more
    written words (`NOT x IN (..)` stays).

    >>> sql = "SELECT name FROM singer WHERE singer_id NOT IN (SELECT singer_id FROM concert)"
    >>> canonical, spans, _ = _negations_as_written(rat.sql_spans(sql), sql)
    >>> canonical[canonical.index("where"):], canonical[slice(*spans[1])]
    ('where singer.singer_id not in (select concert.singer_id from concert)', 'singer.singer_id')
    >>> sql = "SELECT name FROM singer WHERE age IS NOT 3"
    >>> canonical, spans, _ = _negations_as_written(rat.sql_spans(sql, dialect="postgres"), sql, "postgres")
    >>> canonical[canonical.index("where"):], [canonical[slice(*spans[i])] for i in (1, 3, 4)]
    ('where singer.age is not 3', ['singer.age', 'singer.age is not 3', 'singer.age is not 3'])
    """
    from model.nodes.features import written_word_of

    text, spans = located.sql, list(located.spans)
    matched = written_word_of(text, sql, dialect)
    nodes = located.tree.postorder() if located.tree is not None else []
    index = {id(node): i for i, node in enumerate(nodes)}
    for i, node in enumerate(nodes):
        span, operand = spans[i], node.children[0] if node.children else None
        left = spans[index[id(operand)]] if operand is not None else None
        while span is not None and left is not None and left[1] == span[1] and operand.children:
            operand = operand.children[0]  # `not x is y`: the Not's child is the predicate, x its first
            left = spans[index[id(operand)]]
        if span is None or left is None or text[span[0]:span[0] + 4] != "not " \
                or left[0] < span[0] + 4 or text[span[0] + 4:left[0]].strip("("):
            continue  # (not `not x ..`, or `x` already moved: a CTE's node read twice)
        start, stop = span[0], left[1]
        while text.count("(", start, stop) > text.count(")", start, stop) and text[stop:stop + 1] == ")":
            stop += 1  # `not (a + b) in (..)`: the operand's parentheses
        if text.count("(", start, stop) != text.count(")", start, stop) or not text.startswith(" ", stop) \
                or stop + 1 >= span[1]:
            continue  # (no operator after `x`: a plain `not x`)
        best = None  # (words matched, text, its match, where `not` went)
        for at in (stop, stop + 3) if text.startswith(" is ", stop) else (stop,):
            moved = text[:start] + text[start + 4:at] + " not" + text[at:]
            moved_matched = written_word_of(moved, sql, dialect)
            count = sum(j is not None for j in moved_matched[1])
            if count > (best[0] if best else sum(j is not None for j in matched[1])):
                best = (count, moved, moved_matched, at)
        if best is not None:
            _, text, matched, at = best
            spans = [s if s is None or s[0] < start + 4 or s[0] > at else  # (`x`'s nodes moved left;
                     (s[0] - 4, s[1] - 4) if s[1] <= at else (start, s[1])  # `x is y`'s start at `x`)
                     for s in spans]
    return text, spans, matched


def _words_in(words: list[tuple[int, int]], starts: list[int], span: tuple[int, int]) -> tuple[int, int]:
    """The [first, last + 1) of the (non-overlapping, in text order) ``words`` that lie in ``span``."""
    start, end = bisect_left(starts, span[0]), bisect_left(starts, span[1])
    return start, end - 1 if end > start and words[end - 1][1] > span[1] else end


def _unmatched_runs(match: list[int | None], written_words: list[tuple[str, int, int]],
                    comments: list[tuple[int, int]] = (), skip: set[int] = frozenset()
                    ) -> list[tuple[int, int, tuple[int, int] | None] | None]:
    """For each canonical word without a written word (``match[k]`` None) but those in ``skip``
    (a comment's): its run of such words [start, end) (``skip`` words within it, not at its
    ends), and the [start, end) of the written words between those matched just before
    and after the run, less a `;` or word of ``comments`` at either end (None where there are none:
    canonical text with nothing written in its place, as the ON condition of a join written with
    USING; and where they outnumber the run's words by more than one).

    >>> sql = "GROUP BY 1; -- by country"
    >>> words = [("group", 0, 5), ("by", 6, 8), ("1", 9, 10), (";", 10, 11), ("-", 12, 13)]
    >>> _unmatched_runs([0, 1, None, None, None], words, _comments(sql))  # `group by singer . country`
    [None, None, (2, 5, (9, 10)), (2, 5, (9, 10)), (2, 5, (9, 10))]
    >>> _unmatched_runs([0, None, 1], words)  # nothing written between
    [None, (1, 2, None), None]
    >>> _unmatched_runs([0, 1, None, None, None], words, _comments(sql), skip={3, 4})  # `group by x /* c */`
    [None, None, (2, 3, (9, 10)), None, None]
    """
    out: list[tuple[int, int, tuple[int, int] | None] | None] = [None] * len(match)
    k, last = 0, -1  # (the written word of the last matched canonical word)
    while k < len(match):
        if match[k] is not None or k in skip:
            last = last if match[k] is None else match[k]
            k += 1
            continue
        end = k
        while end < len(match) and match[end] is None:
            end += 1
        after = last + 1  # the written words after the last matched one ..
        before = match[end] if end < len(match) else len(written_words)  # .. up to the next
        while end - 1 > k and end - 1 in skip:
            end -= 1
        while after < before and _not_code(written_words[after], comments):
            after += 1
        while after < before and _not_code(written_words[before - 1], comments):
            before -= 1
        # (more written words than canonical ones and one: the words' diff lost its way, as
        # where it matched a subquery's words to the outer query's)
        written = None
        if after < before and sum(not _not_code(written_words[i], comments) for i in range(after, before)) \
                <= sum(i not in skip for i in range(k, end)) + 1:
            written = (written_words[after][1], written_words[before - 1][2])
        for i in range(k, end):
            if i not in skip:
                out[i] = (k, end, written)
        k = end
    return out


def _comments(sql: str, dialect: str = "sqlite") -> list[tuple[int, int]]:
    """The [start, end) of each comment of ``sql`` as ``dialect`` reads it: what lies between the
    tokens of its tokenizer that is not blank (MySQL's `age--1` is a subtraction and its
    `'O\\'Brien'` one string; SQLite's `` `a--b` `` one name).

    >>> _comments("SELECT '--' /* a */ FROM t -- b"), _comments("SELECT age--1 # c", "mysql")
    ([(12, 19), (27, 31)], [(14, 17)])
    """
    if "--" not in sql and "/*" not in sql and "#" not in sql:
        return []
    from rat.canonicalize import sqlglot_dialect

    try:
        tokens = sqlglot_dialect(rat.dialects.dialect(dialect)).tokenize(sql)
    except Exception:  # noqa: BLE001 - (the tree was read, so this does not happen): no comment known
        return []
    out, at = [], 0
    for start, end in [*((t.start, t.end + 1) for t in tokens), (len(sql), len(sql))]:
        gap = sql[at:start]
        if gap.strip():
            out.append((at + len(gap) - len(gap.lstrip()), at + len(gap.rstrip())))
        at = max(at, end)
    return out


def _not_code(word: tuple[str, int, int], comments: list[tuple[int, int]]) -> bool:
    """Whether a written word is a `;` or lies in one of ``comments`` (in text order)."""
    return word[0] == ";" or _in_comment(word[1], comments)


def _in_comment(at: int, comments: list[tuple[int, int]]) -> bool:
    k = bisect_right(comments, at, key=lambda c: c[0]) - 1
    return k >= 0 and at < comments[k][1]


def _closed(sql: str, start: int, end: int) -> tuple[int, int]:
    """``[start, end)`` widened over the closing parentheses that follow it where its text opens
    more than it closes (`USING (a, x` of a join written with USING, whose last word is `x`).

    >>> sql = "SELECT b FROM t JOIN s USING (a, x) WHERE b > 1"
    >>> sql[slice(*_closed(sql, 9, 34))]
    'FROM t JOIN s USING (a, x)'
    """
    open_ = sql.count("(", start, end) - sql.count(")", start, end)
    while open_ > 0:
        at = end
        while at < len(sql) and sql[at].isspace():
            at += 1
        if at == len(sql) or sql[at] != ")":
            break
        end, open_ = at + 1, open_ - 1
    return start, end


def _assemble(example, row: Mapping, schema, conf, site, query_conf, why, tree: rat.Node | None,
              located: list[tuple[int, int] | None] | None, dialect: str = "sqlite") -> ScoredQuery:
    from rat.walks import depths_and_children

    located = located or [None] * len(conf)
    nodes = [ScoredNode(i, name, kind, depth, children, float(c), float(s), span,
                        example.sql[span[0]:span[1]] if span else None, why.get(i, []))
             for i, (name, kind, (depth, children), c, s, span) in enumerate(zip(
                 example.node_names, example.node_types, depths_and_children(example.node_arity),
                 conf, site, located))]
    site = np.asarray(site, dtype=float)
    # the likeliest error sites first; without a site head (NaN scores), the least confident nodes
    order = np.argsort(np.asarray(conf, dtype=float) if len(site) and np.isnan(site).all()
                       else -np.nan_to_num(site, nan=-1.0), kind="stable")
    return ScoredQuery(example.sql, str(row.get("question") or ""), nodes, float(query_conf), int(order[0]),
                       int(order[1]) if len(order) > 1 else None, row.get("db_id"),
                       row.get("question_id"), tree, schema, dialect=dialect)


@dataclass(frozen=True)
class _Budget:
    """One ``score_many`` call's limits: its deadline (``time.monotonic()``), node count and SQL
    length."""

    deadline: float | None = None
    max_nodes: int | None = None
    max_sql_chars: int | None = None


@dataclass
class _Batch:
    """One batch between the preparing stage (worker processes) and the model (this process)."""

    errors: list[RowError | None]  # per row: why it could not be scored, or None
    examples: list
    keys: list[int]  # each example's row in the batch
    schemas: dict
    databases: dict
    positions: list[int]  # each row's position in the whole input
    features: list[np.ndarray] = field(default_factory=list)
    execution_errors: list = field(default_factory=list)  # each example's (Scorer._features)
    columns_holding: list = field(default_factory=list)  # each example's (Scorer._features)
    columns: tuple[str, ...] | None = None  # the features the results hold, when not the model's own
    trees: list = field(default_factory=list)
    spans: list = field(default_factory=list)
    dialects: list[str] = field(default_factory=list)  # each example's SQL dialect


_FREEZE_LOCK = threading.Lock()
_freeze = {"users": 0, "ours": False}  # score_many calls in progress; whether they froze the heap


@contextmanager
def _heap_frozen():
    """Objects alive before scoring (the loaded model, the caller's data) left out of the garbage
    collector's full passes while scoring allocates many small objects; back as they were after
    the last of the calls in progress (several threads, as in rat-serve, share one freeze: one
    thread's unfreeze under another's scoring made every collection a full pass over the model,
    halving throughput). Left alone when the caller froze objects itself."""
    with _FREEZE_LOCK:
        if _freeze["users"] == 0:
            _freeze["ours"] = not gc.get_freeze_count()
            if _freeze["ours"]:
                gc.freeze()
        _freeze["users"] += 1
    try:
        yield
    finally:
        with _FREEZE_LOCK:
            _freeze["users"] -= 1
            if _freeze["users"] == 0 and _freeze["ours"]:
                gc.unfreeze()
                _freeze["ours"] = False


def _schema_key(name: str, j: int, schema: rat.Schema | None, database: Path | Database | None,
                batch: _Batch) -> str:
    """The key row ``j`` of a batch is read under: its ``db_id`` (``name``), unless an earlier
    row of the batch gave that name another schema or database; then a key of its own."""
    key, n = name, 0
    while key in batch.schemas and not (_same_schema(batch.schemas[key], schema)
                                        and _same_database(batch.databases.get(key), database)):
        n += 1
        key = f"{name}#{j}.{n}"
    return key


def _same_schema(a: rat.Schema | None, b: rat.Schema | None) -> bool:
    return a is b or (a is not None and b is not None and (a.tables, a.primary_keys, a.foreign_keys) ==
                      (b.tables, b.primary_keys, b.foreign_keys))


def _same_database(a: Path | Database | None, b: Path | Database | None) -> bool:
    return a is b or (isinstance(a, Path) and isinstance(b, Path) and a == b)


def readable_database(database: Path | Database | None) -> bool:
    """Whether the features had a database to read (a missing file counts as none)."""
    return isinstance(database, Database) or (database is not None and Path(database).is_file())


def _worker_count(workers: int | None, batches: int) -> int:
    """Processes that prepare ``batches``: 1 for one batch, and 1 off the main thread (a web
    app's, say): a fork copies the locks other threads hold at that moment, SQLite's among
    them, and a worker that needs one then waits forever; else ``workers`` (default: up to 4,
    one a core)."""
    import os
    import threading

    if batches <= 1 or threading.current_thread() is not threading.main_thread():
        return 1
    if workers is None:
        workers = min(4, len(os.sched_getaffinity(0))) if hasattr(os, "sched_getaffinity") else 1
    return max(1, min(workers, batches))


_PREPARING: Scorer | None = None  # the scorer a forked worker process prepares batches with


def _set_preparing(scorer: Scorer) -> None:  # (a worker's start: inherited through the fork, not pickled)
    global _PREPARING
    _PREPARING = scorer


def _prepare_in_worker(job: tuple) -> _Batch:
    return _PREPARING._prepare(*job)


class _prepared_batches:
    """The batches prepared in order: here when ``workers`` is 1, else by forked worker
    processes (which inherit the loaded model; the model's own prediction, which uses OpenMP,
    stays in this process)."""

    def __init__(self, scorer: Scorer, jobs: list[tuple], workers: int):
        self.scorer, self.jobs, self.workers, self.pool = scorer, jobs, workers, None

    def __enter__(self):
        if self.workers == 1:
            return (self.scorer._prepare(*job) for job in self.jobs)
        import multiprocessing

        # each worker is handed its scorer as it starts (a module-wide one, set here, was another
        # thread's scorer when two scored at once: features of another model's columns)
        self.pool = start_pool(multiprocessing.get_context("fork"), self.workers,
                               initializer=_set_preparing, initargs=(self.scorer,))
        return self.pool.imap(_prepare_in_worker, self.jobs)

    def __exit__(self, *exc) -> None:
        if self.pool is not None:
            self.pool.terminate()
            self.pool.join()


# ---------------------------------------------------------------------------------------------
# Text


LOW, HIGH = 0.5, 0.8  # terminal colours: red below LOW, yellow below HIGH, green above
# What is said of a node the model reads as an unknown operator (ScoredNode.unfamiliar)
UNFAMILIAR = "the model does not know {kind}: it reads it as any unknown operator, so this confidence says little"


def _paint(text: str, confidence: float, color: bool) -> str:
    if not color:
        return text
    code = "31" if confidence < LOW else "33" if confidence < HIGH else "32"
    return f"\033[{code}m{text}\033[0m"


def _check_options(label_shift, deadline, features, **switches) -> None:
    """``score_many``'s options of the wrong type, a ``TypeError`` naming the first (a string
    read as true, a deadline that is no number, one feature name read as its letters)."""
    for name, value in switches.items():
        if name == "progress" and _is_bar(value):
            continue
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"{name}: expected True or False, found {value!r}"[:200])
    if label_shift is not None and not isinstance(label_shift, (bool, np.bool_)):
        raise TypeError(f"label_shift: expected True, False or None, found {label_shift!r}"[:200])
    if deadline is not None and (isinstance(deadline, bool) or not isinstance(deadline, (int, float))
                                 or math.isnan(deadline)):
        raise TypeError(f"deadline: expected a time.monotonic() value or None, found {deadline!r}"[:200])
    if features is not None and (isinstance(features, (str, bytes)) or not isinstance(features, Sequence)
                                 or not all(isinstance(name, str) for name in features)):
        raise TypeError(f"features: expected a list of feature names, found {features!r}"[:200])


def _is_bar(progress) -> bool:
    """Whether ``progress`` is a caller's bar (``update(n)``), not True / False."""
    return not isinstance(progress, (bool, np.bool_)) and callable(getattr(progress, "update", None))


def _check_rows(rows) -> None:
    """``rows`` of ``score_many`` / ``check_many``: an iterable of rows, else a ``TypeError`` naming it."""
    if isinstance(rows, (str, bytes, Mapping)) or not isinstance(rows, Iterable):
        raise TypeError(f"rows: expected an iterable of rows (mappings), found {type(rows).__name__}; "
                        "score() scores one query")


def format_scored(scored: ScoredQuery, color: bool = False) -> str:
    """The tree (root first, children indented) with confidences, site scores and reasons, then
    the whole-query confidence (and the dialect the SQL was read in, unless SQLite's) and "look
    here first". Text from the query and the database is shown ``printable``: control
    characters do not reach the terminal."""
    lines = []

    def emit(i: int) -> None:
        n = scored.nodes[i]
        mark = "  <- look here first" if i == scored.look_here_first else ""
        lines.append(f"{_paint(f'{n.confidence:.2f}', n.confidence, color)}  {'  ' * n.depth}{printable(n.label)}{mark}")
        if n.unfamiliar:
            lines.append(f"{'':6}{'  ' * n.depth}  · {UNFAMILIAR.format(kind=n.kind)}")
        for reason in n.reasons:
            lines.append(f"{'':6}{'  ' * n.depth}  · {printable(reason.text)} (+{reason.gain:.2f} if typical)")
        for c in n.children:
            emit(c)

    emit(len(scored.nodes) - 1)
    look = scored.nodes[scored.look_here_first]
    dialect = f" (read as {scored.dialect} SQL)" if scored.dialect != "sqlite" else ""
    lines.append(f"query confidence: {_paint(f'{scored.query_confidence:.2f}', scored.query_confidence, color)}"
                 + dialect)
    if unfinished(scored.execution_error):
        lines.append(f"stopped on the database ({printable(scored.execution_error)}): scored without its result")
    elif scored.execution_error:
        lines.append(f"did not run on the database: {printable(scored.execution_error)}")
    then = ""
    if scored.runner_up is not None:
        second = scored.nodes[scored.runner_up]
        then = f"; then `{printable(second.text or second.label)}`"
    trust = ("" if scored.look_here_reliability is None else
             f": at such scores the pointer was on an error site in {scored.look_here_reliability:.0%} "
             "of wrong queries, out of fold")
    lines.append(f"look here first: `{printable(look.text or look.label)}` (node {look.index}, {printable(look.label)}, "
                 f"site score {look.site_score:.2f}{trust}){then}")
    second = scored.nodes[scored.runner_up] if scored.runner_up is not None else None
    if look.span is not None:
        lines += ["", *marked_sql(scored.sql, look.span, second.span if second is not None else None)]
    return "\n".join(lines)


def marked_sql(sql: str, first: tuple[int, int], second: tuple[int, int] | None = None) -> list[str]:
    """The SQL with ``^`` under the text to look at first and ``-`` under the runner-up's (where
    they do not overlap), as many marks under each character as the columns a terminal gives it
    (``_columns``: two for a wide one, none for a combining mark); a tab is one space, other
    control characters ``printable``'s U+FFFD. SQL of several lines (LF, CRLF or CR) shows the
    lines that hold a mark, each with its number, and ``...`` where lines are left out: a long
    model's marks stand under their line, not at column 3,000 of one.

    >>> print("\\n".join(marked_sql("SELECT name FROM singer WHERE age > 20", (30, 38), (7, 11))))
    SELECT name FROM singer WHERE age > 20
           ----                   ^^^^^^^^ look here first; - then
    >>> print("\\n".join(marked_sql("WITH a AS (\\n  SELECT 名前 FROM t\\n)\\nSELECT x\\nFROM a\\nWHERE x = 1",
    ...                              (21, 23), (55, 60))))
    2 |   SELECT 名前 FROM t
      |          ^^^^
      ...
    6 | WHERE x = 1
      |       ----- look here first; - then
    """
    lines = [(m.start(), m.group(1)) for m in re.finditer(r"([^\r\n]*)(?:\r\n|\r|\n|$)", sql)][:-1] or [(0, "")]
    shown_lines = []
    for number, (start, text) in enumerate(lines, 1):
        shown, marks = [], []
        for at, char in enumerate(text, start):
            shown.append(" " if char == "\t" else printable(char))
            mark = ("^" if first[0] <= at < first[1] else
                    "-" if second is not None and second[0] <= at < second[1] else " ")
            marks.append(mark * _columns(shown[-1]))
        shown_lines.append((number, "".join(shown), "".join(marks).rstrip()))
    legend = " look here first" + ("; - then" if second is not None else "")
    if len(shown_lines) == 1:
        return [shown_lines[0][1], shown_lines[0][2] + legend]
    width = len(str(len(shown_lines)))
    out: list[str] = []
    last = 0
    for number, shown, marks in shown_lines:
        if not marks:
            continue
        if out and number > last + 1:
            out.append(f"{'':>{width}} ...")
        out += [f"{number:>{width}} | {shown}".rstrip(), f"{'':>{width}} | {marks}"]
        last = number
    if not out:  # (no span inside the text)
        return [shown_lines[0][1], legend.strip()]
    return [*out[:-1], out[-1] + legend]


def _columns(char: str) -> int:
    """The columns a terminal gives one character: two for a wide or full-width one (CJK, most
    emoji), none for a combining mark or a zero-width one (a joiner, a variation selector), else one.

    >>> [_columns(c) for c in ("a", "名", "🎉", "\\u0301", "\\u200d", "é")]
    [1, 2, 2, 0, 0, 1]
    """
    if unicodedata.combining(char) or unicodedata.category(char) in ("Mn", "Me") or char in _ZERO_WIDTH:
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


_ZERO_WIDTH = frozenset("\u200b\u200c\u200d\u2060\ufeff")


def report_entries(results: Sequence[ScoredQuery]) -> list[dict[str, Any]]:
    """``model.eval.report.html_report`` entries of scored queries (no gold: no labels)."""
    from model.nodes.outputs import tree_of

    entries = []
    for r in results:
        tree = r.tree or tree_of({"node_names": [n.label for n in r.nodes],
                                  "node_arity": [len(n.children) for n in r.nodes]})
        entries.append({"tree": tree, "confidences": [n.confidence for n in r.nodes],
                        "schema": r.schema, "sql": r.sql, "dialect": r.dialect, "question": r.question,
                        "question_id": r.question_id, "db_id": r.db_id,
                        "query_confidence": r.query_confidence,
                        "site_scores": [n.site_score for n in r.nodes], "look_here": r.look_here_first,
                        "runner_up": r.runner_up,
                        "reasons": {n.index: [x.text for x in n.reasons] for n in r.nodes if n.reasons}})
    return entries

