"""Node-model examples: (schema, question, predicted SQL) -> text, node positions and node labels.

Flow: questions + predictions or perturbations -> execution outcome (model.data.execution)
-> RATs and node labels (rat) -> `NodeExample` (text + character position of each node's last
character) -> `TokenizedExample` (token ids + the token holding each node's last character),
with the schema pruned to fit `max_tokens`, never the RAT. Bad input is counted per reason in an
`ExampleReport`, never raised.

Text layout (one example):

    schema: products: product_id, name, supplier_id | suppliers: supplier_id, name
    question: Which suppliers ...?
    tree: ((products.name)(products)Project)
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pickle
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import rat
from model.data.cache import cache_dir as project_cache_dir
from model.data.datasets import Question, database_path, load_questions, load_schemas, question_text
from model.data.execution import DEFAULT_TIMEOUT_S, execute_pairs
from model.data.predictions import load_predictions
from model.synth.perturb import DEFAULT_MIX, Perturber

log = logging.getLogger(__name__)

LABEL_KINDS = ("execution", "tree")  # build_examples(labels=...), data.labels
_WRONG = {"mismatch": False, "pred_error": False, "timeout": False, "match": True}


@dataclass
class NodeExample:
    question_id: str
    db_id: str
    system: str  # e.g. "codes_7b", or "perturb:column" for a perturbation of the gold query
    sql: str
    text: str  # full model input: compact schema + question + RAT post-order string
    node_char_ends: list[int]  # per node (post-order): index in `text` of its last character
    node_labels: list[int]  # 1 = correct node, 0 = wrong (rat.label_nodes)
    node_types: list[str]  # "table" | "column" | "value" | the operator label ("Project", ...)
    execution_match: bool | None  # None when there is no database to execute on
    # The pieces `text` is made of, so that tokenize_examples can prune the schema to fit.
    question: str = ""
    tree_text: str = ""  # rat.serialize of the predicted tree (for people and the model input)
    # The tree itself, post-order (label and number of children per node), so that downstream
    # steps rebuild it (model.nodes.outputs.tree_of) instead of parsing the SQL again.
    node_names: list[str] = field(default_factory=list)
    node_arity: list[int] = field(default_factory=list)
    schema_tables: dict[str, list[str]] = field(default_factory=dict)
    used_tables: dict[str, list[str]] = field(default_factory=dict)  # what the SQL reads
    # the predicted tree is gold's (the tree label of the whole query, whatever `node_labels`
    # were labelled by); None where there was no gold tree to compare with
    tree_match: bool | None = None

    @property
    def correct(self) -> bool:
        """The whole query is right: it executes to gold's result, or without a database to
        execute on, its tree is gold's (every node right; tree labels are stricter than
        execution: an equivalent query written differently counts as wrong)."""
        return bool(self.execution_match) if self.execution_match is not None else all(self.node_labels)


@dataclass
class TokenizedExample:
    input_ids: list[int]
    node_positions: list[int]  # per node: index in input_ids of the token holding its last char
    node_labels: list[int]
    question_id: str
    db_id: str
    system: str
    sql: str
    node_types: list[str]
    execution_match: bool | None
    pruned_schema: bool = False  # True when schema items were left out to fit max_tokens
    tree: str = ""  # rat.serialize of the predicted tree
    node_names: list[str] = field(default_factory=list)
    node_arity: list[int] = field(default_factory=list)
    weight: int = 1  # how many identical outputs this example stands for (training dedupe)
    node_agreement: list[float] | None = None  # per node: share of the question's other outputs
    # containing it (model.nodes.features.node_agreements); None = not computed / no other output


@dataclass
class ExampleReport:
    """What happened to every candidate example; `summary()` is printed by build_examples."""

    kept: int = 0
    skipped: Counter = field(default_factory=Counter)  # reason -> count
    kept_by_source: Counter = field(default_factory=Counter)  # system or perturbation kind
    execution: Counter = field(default_factory=Counter)  # outcome -> count

    def summary(self) -> str:
        total = self.kept + sum(self.skipped.values())
        lines = [f"examples: kept {self.kept} of {total}"]
        for reason, n in sorted(self.skipped.items(), key=lambda kv: -kv[1]):
            lines.append(f"  skipped {n:6d}  {reason}")
        if self.execution:
            lines.append("  execution: " + ", ".join(f"{k} {v}" for k, v in
                                                     sorted(self.execution.items())))
        if self.kept_by_source:
            lines.append("  kept by source: " + ", ".join(
                f"{k} {v}" for k, v in sorted(self.kept_by_source.items())))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


# ---------------------------------------------------------------------------------------------
# Text


def data_root(root: str | Path | None) -> Path:
    """A data config's ``root``: that folder, or (``None``) the embedded demo corpus, built under
    the cache on first use (``model.synth.demo``)."""
    if root is None:
        from model.synth.demo import demo_root

        return demo_root()
    return Path(root).expanduser()


def node_type(node: rat.Node, parent: rat.Node | None = None) -> str:
    """'table', 'column' or 'value' for leaves, the operator label otherwise (``rat.node_kind``
    decides, the one place that does).

    >>> [node_type(n) for n in rat.to_tree("SELECT name FROM singer WHERE age > 20").postorder()]
    ['column', 'column', 'value', 'Gt', 'table', 'Selection', 'Project']
    """
    kind = rat.node_kind(node, parent)
    return node.label if kind in ("relation", "operator") else kind


def node_types(tree: rat.Node) -> list[str]:
    """``node_type`` of every node in post-order, each read with its parent.

    >>> node_types(rat.to_tree("SELECT count(1) FROM singer"))
    ['column', 'Count', 'table', 'Project']
    """
    out: list[str] = []
    stack: list[tuple[rat.Node, rat.Node | None, bool]] = [(tree, None, False)]
    while stack:  # iterative post-order: trees may be deep
        node, parent, expanded = stack.pop()
        if expanded:
            out.append(node_type(node, parent))
            continue
        stack.append((node, parent, True))
        stack.extend((child, node, False) for child in reversed(node.children))
    return out


def used_items(tree: rat.Node, schema: rat.Schema | None) -> dict[str, list[str]]:
    """Tables (with the columns) a RAT reads, as the schema names them."""
    used: dict[str, list[str]] = {}
    for node in tree.postorder():
        kind = node_type(node)
        if kind == "table" and (schema is None or node.label in schema.tables):
            used.setdefault(node.label, [])
        elif kind == "column" and "." in node.label:
            source = node.label if schema is None else schema.source(node.label)  # t_2.c: t.c
            if source is not None:
                table, column = source.split(".", 1)
                columns = used.setdefault(table, [])
                if column not in columns:
                    columns.append(column)
    return used


def serialize_schema(tables: dict[str, Sequence[str]]) -> str:
    """Compact schema text: 'table: col, col | table2: col'.

    >>> serialize_schema({"singer": ["singer_id", "name"], "concert": ["year"]})
    'singer: singer_id, name | concert: year'
    """
    return " | ".join(f"{t}: {', '.join(cols)}" for t, cols in tables.items())


def compose_text(schema_text: str, question: str, tree_text: str) -> tuple[str, int]:
    """The model input and the offset of the RAT string in it."""
    head = f"schema: {schema_text}\nquestion: {' '.join(question.split())}\ntree: "
    return head + tree_text, len(head)


def node_labels(tree: rat.Node, gold_tree: rat.Node | None, execution_match: bool | None = None) -> list[int]:
    """Post-order labels of ``tree``'s nodes: all 1 when execution matches, else
    ``rat.label_nodes`` against ``gold_tree``, with the root marked wrong when every node occurs
    in gold but the trees differ (the prediction only omits something) and execution does not
    match or, with no database, was not tried.

    >>> gold = rat.to_tree("SELECT name FROM singer WHERE age > 40 LIMIT 3")
    >>> node_labels(rat.to_tree("SELECT name FROM singer WHERE age > 40"), gold)[-1]
    0
    >>> node_labels(rat.to_tree("SELECT name FROM singer"), gold, execution_match=True)
    [1, 1, 1]
    """
    if execution_match:
        return [1] * len(tree.postorder())
    labels = rat.label_nodes(tree, gold_tree, bool(execution_match))
    if execution_match is not True and all(labels) and tree.hash != gold_tree.hash:
        # An omission (a dropped LIMIT, DISTINCT or condition) leaves every predicted
        # subtree inside gold; the root stands for the whole query, which is wrong.
        labels[-1] = 0
    return labels


def make_example(question: Question, sql: str, system: str, schema: rat.Schema | None,
                 gold_tree: rat.Node | None = None, execution_match: bool | None = None,
                 tree: rat.Node | None = None, dialect: str = "sqlite") -> NodeExample:
    """One example; labels all 1 when execution matches, else from rat.label_nodes against
    `gold_tree` (with the root marked wrong when every node occurs in gold but the trees differ,
    i.e. the prediction only omits something, and execution does not match or, with no
    database, was not tried), else all 0 (raises rat.RATError on SQL it cannot read). Inference calls it
    with no gold and ignores the labels. ``tree``: ``sql``'s tree when the caller has it already;
    ``dialect``: the SQL dialect ``sql`` is written in (``rat.DIALECTS``)."""
    tree = tree if tree is not None else rat.to_tree(sql, schema, dialect)
    nodes = tree.postorder()
    labels = node_labels(tree, gold_tree, execution_match) if gold_tree is not None or execution_match \
        else [0] * len(nodes)
    tables = {t: list(cols) for t, cols in schema.tables.items()} if schema else {}
    tree_text = rat.serialize(tree)
    text, offset = compose_text(serialize_schema(tables), question.question, tree_text)
    return NodeExample(
        question_id=question.question_id, db_id=question.db_id, system=system, sql=sql,
        text=text, node_char_ends=[offset + i for i in rat.node_ends(tree)], node_labels=labels,
        node_types=node_types(tree), execution_match=execution_match,
        question=question.question, tree_text=tree_text, schema_tables=tables,
        node_names=[n.label for n in nodes], node_arity=[len(n.children) for n in nodes],
        used_tables=used_items(tree, schema),
        tree_match=None if gold_tree is None else tree.hash == gold_tree.hash,
    )


# ---------------------------------------------------------------------------------------------
# Building examples


def build_examples(
    root: Path,
    split: str,
    prediction_files: Sequence[Path] = (),
    perturbations_per_query: int = 0,
    seed: int = 0,
    max_questions: int | None = None,
    include_gold: bool = False,
    mix: dict[str, float] | None = None,
    require_database: bool = True,
    execution_cache: Path | None = None,
    workers: int = 1,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    progress: bool = False,
    verbose: bool = True,
    evidence: bool = False,
    labels: str = "execution",
) -> tuple[list[NodeExample], ExampleReport]:
    """Labelled examples for the questions of `split` under `root`.

    Sources: every prediction file (any format `load_predictions` reads; system = file stem
    unless the file names it) and `perturbations_per_query` perturbations of each gold query
    (system "perturb:<kind>", drawn with `mix`), and with `include_gold` the gold queries
    themselves (system "gold", every node correct). They can be combined. Each is executed against
    gold (cached under `execution_cache`, default <cache>/exec) and labelled with
    `rat.label_nodes(pred, gold, execution_match)`. Without a database an example is skipped
    (`require_database`) or labelled by tree comparison alone (execution_match None).
    With `evidence` (BIRD), an example's question is the question with its evidence
    (`model.data.datasets.question_text`): the features and the model input read both.
    `labels`: ``execution`` labels by execution match where there is a database (by tree
    comparison where there is none); ``tree`` by tree comparison with gold always (the paper's
    node labels, BIRD's here: an equivalent query written differently is wrong), the database
    still read for execution (features) and required as `require_database` says.
    """
    from model.errors import UsageError

    if labels not in LABEL_KINDS:
        raise UsageError(f"data.labels must be execution or tree; found {labels!r}")
    if max_questions is not None and (isinstance(max_questions, bool) or not isinstance(max_questions, int)
                                      or max_questions < 1):
        raise UsageError(f"data.max_questions must be a whole number of 1 or more, or null (all); "
                         f"found {max_questions!r}")
    root = Path(root)
    report = ExampleReport()
    all_questions = load_questions(root, split)
    questions = all_questions[:max_questions]
    schemas = load_schemas(root)
    candidates = _predicted(prediction_files, all_questions, questions, report)
    if perturbations_per_query > 0:
        candidates += _perturbed(root, questions, schemas, perturbations_per_query, seed, mix, report)
    if include_gold:
        candidates += [(q, q.gold_sql, "gold") for q in questions]
    cache = execution_cache if execution_cache is not None else project_cache_dir("exec")
    outcome_of = _execution_outcomes(root, candidates, cache, workers, timeout_s, progress)
    examples = _labelled(candidates, schemas, outcome_of, require_database, report, evidence, labels == "tree",
                         unknown_db_reason(root))
    if verbose:
        print(f"[{root.name}/{split}] " + report.summary())
    return examples, report


Candidate = tuple[Question, str, str]  # (question, predicted SQL, system)


def _predicted(prediction_files: Sequence[Path], all_questions: list[Question],
               questions: list[Question], report: ExampleReport) -> list[Candidate]:
    """The prediction files' outputs for ``questions``; a file the loader refuses is counted."""
    candidates: list[Candidate] = []
    by_id = {q.question_id: q for q in questions}
    for path in prediction_files:
        try:
            # Files answer the whole split (or, id-keyed JSONL, part of it); max_questions only
            # selects which are used.
            predictions = load_predictions(Path(path), all_questions, skipped=report.skipped,
                                           allow_partial=Path(path).suffix == ".jsonl")
        except (OSError, ValueError) as error:
            report.skipped[f"prediction file unreadable ({Path(path).name})"] += 1
            log.warning("%s", error)
            continue
        candidates += [(by_id[p.question_id], p.sql, p.system) for p in predictions if p.question_id in by_id]
    return candidates


def unknown_db_reason(root: Path) -> str:
    """Why a question's ``db_id`` has no schema, naming where the schemas were read
    (``model.data.datasets.load_schemas``): ``tables.json`` (or BIRD's ``*_tables.json``) lacks
    it, though its database may be there; without those files, it has no database file."""
    root = Path(root)
    files = ["tables.json"] if (root / "tables.json").exists() else sorted(p.name for p in root.glob("*_tables.json"))
    return f"db_id not in {' or '.join(files)}" if files else "db_id has no database/<db_id>/<db_id>.sqlite"


def _perturbed(root: Path, questions: list[Question], schemas: dict, n: int, seed: int,
               mix: dict[str, float] | None, report: ExampleReport) -> list[Candidate]:
    """``n`` perturbations of each gold query, system ``perturb:<kind>``."""
    candidates: list[Candidate] = []
    perturbers: dict[str, Perturber] = {}
    unknown_db = unknown_db_reason(root)
    for index, q in enumerate(questions):
        if q.db_id not in schemas:
            report.skipped[unknown_db] += 1
            continue
        if q.db_id not in perturbers:
            perturbers[q.db_id] = Perturber(schemas[q.db_id], database_path(root, q.db_id),
                                            mix=mix or DEFAULT_MIX)
        try:
            made = perturbers[q.db_id].perturb(q.gold_sql, n=n, seed=seed * 1_000_003 + index)
        except rat.RATError:
            report.skipped["unparsable gold SQL (perturbation)"] += 1
            continue
        candidates += [(q, p.sql, f"perturb:{p.kind}") for p in made]
    return candidates


def _execution_outcomes(root: Path, candidates: list[Candidate], cache: Path, workers: int,
                        timeout_s: float, progress: bool) -> dict[tuple[str, str, str], str]:
    """Execution outcome of every candidate that has a database, all at once (parallel, cached)."""
    db_paths = {db_id: database_path(root, db_id) for db_id in {q.db_id for q, _, _ in candidates}}
    executable = [(q, sql, system) for q, sql, system in candidates if db_paths.get(q.db_id)]
    outcomes = execute_pairs([(db_paths[q.db_id], sql, q.gold_sql) for q, sql, _ in executable],
                             timeout_s=timeout_s, cache_dir=cache, workers=workers,
                             progress=progress) if executable else []
    return {(q.question_id, sql, system): o for (q, sql, system), o in zip(executable, outcomes, strict=True)}


def _labelled(candidates: list[Candidate], schemas: dict, outcome_of: dict, require_database: bool,
              report: ExampleReport, evidence: bool = False, tree_labels: bool = False,
              unknown_db: str = "db_id not in tables.json") -> list[NodeExample]:
    """Trees and node labels of the candidates; each one left out is counted by reason
    (``unknown_db``: the reason for a db_id without a schema, ``unknown_db_reason``).
    ``tree_labels``: label by tree comparison even where execution matched or not."""
    gold_trees: dict[str, rat.Node | None] = {}
    examples = []
    for q, sql, system in candidates:
        if q.db_id not in schemas:
            report.skipped[unknown_db] += 1
            continue
        outcome = outcome_of.get((q.question_id, sql, system), "no_database")
        report.execution[outcome] += 1
        if outcome == "no_database" and require_database:
            report.skipped["missing database"] += 1
            continue
        if outcome == "gold_error":
            report.skipped["gold SQL fails to execute"] += 1
            continue
        schema = schemas[q.db_id]
        if q.question_id not in gold_trees:
            try:
                gold_trees[q.question_id] = rat.to_tree(q.gold_sql, schema)
            except rat.RATError:
                gold_trees[q.question_id] = None
        if gold_trees[q.question_id] is None:
            report.skipped["unparsable gold SQL"] += 1
            continue
        if not sql or not sql.strip():
            report.skipped["empty predicted SQL"] += 1
            continue
        try:
            asked = replace(q, question=question_text(q.question, q.evidence)) if evidence else q
            match = None if tree_labels else _WRONG.get(outcome)
            example = make_example(asked, sql, system, schema, gold_trees[q.question_id], match)
        except rat.RATError:
            report.skipped["unparsable or unsupported predicted SQL"] += 1
            continue
        examples.append(example)
        report.kept += 1
        report.kept_by_source[system.split(":")[0] if system.startswith("perturb:") else system] += 1
    return examples


# ---------------------------------------------------------------------------------------------
# Tokenization


def _tokenizer_name(tokenizer) -> str:
    return f"{getattr(tokenizer, 'name_or_path', type(tokenizer).__name__)}:{len(tokenizer)}"


def _encode(tokenizer, text: str) -> tuple[list[int], list[tuple[int, int]]]:
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    return list(encoded["input_ids"]), [tuple(o) for o in encoded["offset_mapping"]]


def _positions(offsets: list[tuple[int, int]], char_ends: list[int]) -> list[int] | None:
    """Index of the token whose span holds each character (None if one is not covered)."""
    owner: dict[int, int] = {}
    for index, (start, end) in enumerate(offsets):
        for char in range(start, end):
            owner.setdefault(char, index)
    positions = [owner.get(c) for c in char_ends]
    return None if any(p is None for p in positions) else positions


def fit_schema(example: NodeExample, count_tokens, max_tokens: int, seed: int = 0
               ) -> dict[str, list[str]] | None:
    """The largest schema (used items + seeded random others) whose text fits `max_tokens`,
    or None when even the used items alone do not fit."""
    used = {t: list(cols) for t, cols in example.used_tables.items()}
    rng = random.Random(f"{seed}:{example.question_id}:{example.sql}")
    others = [(t, c) for t, cols in example.schema_tables.items() for c in cols
              if c not in used.get(t, ())]
    rng.shuffle(others)

    def schema_with(k: int) -> dict[str, list[str]]:
        chosen = {(t, c) for t, c in others[:k]}
        # Keep the database's own table and column order, so pruning only removes items.
        out = {}
        for table, cols in example.schema_tables.items():
            kept = [c for c in cols if c in used.get(table, ()) or (table, c) in chosen]
            if kept or table in used:
                out[table] = kept
        return out

    def fits(k: int) -> bool:
        text, _ = compose_text(serialize_schema(schema_with(k)), example.question,
                               example.tree_text)
        return count_tokens(text) <= max_tokens

    if not fits(0):
        return None
    low, high = 0, len(others)  # binary search for the most random extras that still fit
    while low < high:
        mid = (low + high + 1) // 2
        if fits(mid):
            low = mid
        else:
            high = mid - 1
    return schema_with(low)


def tokenize_example(example: NodeExample, tokenizer, max_tokens: int
                     ) -> tuple[TokenizedExample | None, str | None]:
    """(tokenized example, None) or (None, reason it was skipped)."""
    text, char_ends, pruned = example.text, example.node_char_ends, False
    ids, offsets = _encode(tokenizer, text)
    if len(ids) > max_tokens:
        tree_tokens = len(_encode(tokenizer, example.tree_text)[0])
        if tree_tokens > max_tokens:
            return None, "RAT alone longer than max_tokens"
        tables = fit_schema(example, lambda t: len(_encode(tokenizer, t)[0]), max_tokens)
        if tables is None:
            return None, "too long even with the schema pruned to the items the SQL uses"
        text, offset = compose_text(serialize_schema(tables), example.question, example.tree_text)
        shift = offset - (len(example.text) - len(example.tree_text))
        char_ends = [c + shift for c in example.node_char_ends]
        ids, offsets = _encode(tokenizer, text)
        pruned = True
    positions = _positions(offsets, char_ends)
    if positions is None:
        return None, "node end not covered by any token"
    return TokenizedExample(
        input_ids=ids, node_positions=positions, node_labels=list(example.node_labels),
        question_id=example.question_id, db_id=example.db_id, system=example.system,
        sql=example.sql, node_types=list(example.node_types),
        execution_match=example.execution_match, pruned_schema=pruned, tree=example.tree_text,
        node_names=list(example.node_names), node_arity=list(example.node_arity)), None


def tokenize_examples(examples: Sequence[NodeExample], tokenizer, max_tokens: int,
                      cache_dir: Path | None = None, report: ExampleReport | None = None
                      ) -> list[TokenizedExample]:
    """Tokenize with `tokenizer` (a fast tokenizer: offsets are needed), pruning the schema of
    examples longer than `max_tokens`; examples that cannot fit are skipped and counted in
    `report`. Results are cached on disk keyed by (examples, tokenizer, max_tokens)."""
    key = hashlib.sha256()
    key.update(f"{_tokenizer_name(tokenizer)}|{max_tokens}|v2".encode())
    for e in examples:
        key.update(json.dumps(asdict(e), sort_keys=True).encode())
    path = (cache_dir or project_cache_dir("tokens")) / f"{key.hexdigest()[:32]}.pkl"
    if path.exists():
        with open(path, "rb") as f:
            tokenized, skipped = pickle.load(f)
    else:
        tokenized, skipped = [], Counter()
        for example in examples:
            item, reason = tokenize_example(example, tokenizer, max_tokens)
            if item is None:
                skipped[reason] += 1
            else:
                tokenized.append(item)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        with open(tmp, "wb") as f:
            pickle.dump((tokenized, skipped), f)
        tmp.replace(path)
    if skipped:
        log.warning("tokenize_examples: skipped %s", dict(skipped))
    if report is not None:
        report.skipped.update(skipped)
        report.kept -= sum(skipped.values())
    return tokenized
