"""LightningDataModule for the node model: builds labelled, tokenized examples once, splits them by
database (schema-disjoint train/val/test) and batches all outputs for one question together.

Where examples come from (the paper's setup, see ``NodeDataModule``):
- train: perturbations of the ``train_split`` gold queries, real outputs on ``train_split``
  questions (``train_predictions``: id-keyed JSONL may cover part of the split) and, with
  ``train_gold``, the gold queries themselves (all nodes correct); plus, on the ``eval_split``
  databases assigned to train, the real predictions (and perturbations of those questions' gold);
- val / test: the real predictions on their databases (perturbations of gold only when the root
  has no predictions at all, e.g. a corpus without systems' outputs).

Protocols: ``split`` divides the eval databases once into train / val / test; ``crossfit`` puts
them into ``folds`` schema-disjoint folds (``model.data.folds``) and ``use_fold(i)`` makes fold i
the test set, fold i+1 validation and the rest training, so one model per fold gives every
prediction an out-of-fold confidence (``model.train`` runs the folds). Examples are built and
tokenized once for all folds. Identical training inputs (systems often agree) are trained on once,
weighted by how many outputs they stand for (``dedupe_train``).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from model.data.folds import check_holdout_system, check_run_folds, holdout_keeps, split_databases
from model.data.predictions import prediction_files
from model.nodes.examples import data_root

SPLITS = ("train", "val", "test")


class NodeDataModule(L.LightningDataModule):
    def __init__(
        self,
        root: str | None = None,  # Spider-format root; None = the embedded demo corpus
        train_split: str | None = "train",  # gold queries perturbed for training; None = skip
        eval_split: str = "dev",  # the split the predictions answer; its dbs are divided 3 ways
        predictions: str | Sequence[str] | None = None,  # files or globs; None = root/predictions/*
        use_predictions: bool = True,  # real systems' outputs as training examples
        use_perturbations: bool = True,  # perturbed gold queries as training examples
        train_perturbations: int = 4,  # perturbations per train_split gold query
        eval_perturbations: int = 4,  # perturbations per eval_split gold query on train dbs
        val_fraction: float = 0.2,  # share of eval_split questions whose dbs go to val
        test_fraction: float = 0.4,  # share of eval_split questions whose dbs go to test
        split_seed: int = 0,  # fixed apart from the training seed so every run tests the same dbs
        max_questions: int | None = None,  # cap per source split (quick runs and tests)
        lm_name_or_path: str | None = None,  # tokenizer = the embedder's (same values as model.nodes.embedder)
        lm_gguf_file: str | None = None,
        lm_cache_dir: str | None = None,
        max_tokens: int = 2048,  # = the encoder's max_positions
        batch_size: int = 32,  # examples per batch (whole question groups are kept together)
        num_workers: int = 0,
        seed: int = 0,  # perturbation sampling and batch order
        example_options: dict[str, Any] | None = None,  # extra keyword arguments to build_examples
        protocol: str = "split",  # split: one fixed train/val/test division of the eval dbs;
        # crossfit: k folds of the eval dbs, one model per fold (use_fold)
        folds: int = 5,  # crossfit folds
        run_folds: Sequence[int] | None = None,  # crossfit: only these folds (a partial, budgeted run)
        fold_calibration: str = "platt",  # crossfit: each fold's model calibrated on its val dbs
        train_predictions: str | Sequence[str] | None = None,  # outputs on train_split questions
        train_gold: bool = False,  # train_split gold queries as all-correct examples
        dedupe_train: bool = True,  # identical training inputs once, weighted by their count
        consensus: bool = False,  # attach each node's agreement with the question's other outputs
        holdout_system: str | None = None,  # leave one system out: train/val without it, test only it
        labels: str = "execution",  # execution | tree: build_examples(labels=...)
        llm_answers: str | Sequence[str] | None = None,  # a code LLM's answers on train_split questions:
        # read by the boosted scorer (model.train_predictions), not here
        sources_file: str | None = None,  # the built, tokenized sources: read when the file exists
        # (no data folder, databases or tokenizer needed: a GPU machine trains from it), else
        # built and written there (write_sources)
    ):
        from model.errors import UsageError

        super().__init__()
        if protocol not in ("split", "crossfit"):
            raise UsageError(f"data.protocol must be split or crossfit; found {protocol!r}")
        if fold_calibration not in ("platt", "isotonic", "none"):
            raise UsageError(f"data.fold_calibration must be platt, isotonic or none; found {fold_calibration!r}")
        if labels not in ("execution", "tree"):
            raise UsageError(f"data.labels must be execution or tree; found {labels!r}")
        check_run_folds(run_folds, folds)
        self.save_hyperparameters(logger=False)
        self.datasets: dict[str, list] = {}
        self.db_split: dict[str, str] = {}
        self.reports: dict[str, Any] = {}
        self.sources: dict[str, list] = {}  # tokenized examples per source, built once
        self.fold: int | None = None

    @classmethod
    def from_tokenized(cls, datasets: dict[str, list], pad_id: int = 0, **kwargs) -> NodeDataModule:
        """A datamodule over examples already built and tokenized (one list per split), e.g.
        examples from another corpus, or synthetic ones in tests. Items need ``input_ids``,
        ``node_positions``, ``node_labels`` and ``question_id`` attributes."""
        if set(datasets) != set(SPLITS):
            raise ValueError(f"need datasets for {SPLITS}, found {sorted(datasets)}")
        module = cls(**kwargs)
        module.datasets = {s: list(datasets[s]) for s in SPLITS}
        module.pad_id = pad_id
        module.db_split = {e.db_id: s for s in SPLITS for e in datasets[s] if hasattr(e, "db_id")}
        return module

    # ------------------------------------------------------------------ building

    @property
    def root(self) -> Path:
        return data_root(self.hparams.root)

    def prediction_files(self, spec: str | Sequence[str] | None = ..., default: bool = True) -> list[Path]:
        """Files of ``spec`` (globs; default: ``predictions``); None = ``<root>/predictions/*``
        (``model.data.predictions.prediction_files``)."""
        return prediction_files(self.root, self.hparams.predictions if spec is ... else spec, default)

    def setup(self, stage: str | None = None) -> None:
        if self.datasets:
            return
        self.build_sources()
        if self.hparams.protocol == "crossfit":
            self.use_fold(0 if self.fold is None else self.fold)
        else:
            counts = Counter(e.db_id for e in self._eval_examples())
            self._assign(split_databases(counts, self.hparams.val_fraction, self.hparams.test_fraction,
                                         self.hparams.split_seed))

    def tokenizer(self):
        from model.lm import load_tokenizer

        h = self.hparams
        return load_tokenizer(h.lm_name_or_path, h.lm_gguf_file, h.lm_cache_dir)

    def build_sources(self) -> None:
        """Build, label and tokenize every source once (``self.sources``), attaching node
        agreements when ``consensus`` is set."""
        if self.sources:
            return
        from model.nodes.examples import tokenize_examples

        path = self.hparams.sources_file
        if path and Path(path).is_file():
            self.pad_id, self.sources = read_sources(path, self.sources_key())
            return
        built = self._build()
        tokenizer = self.tokenizer()
        self.pad_id = pad_id(tokenizer)
        for name, examples in built.items():
            tokenized = tokenize_examples(examples, tokenizer, self.hparams.max_tokens)
            if self.hparams.consensus:
                attach_agreements(tokenized)
            self.sources[name] = tokenized
        if path:
            write_sources(path, self.sources_key(), self.pad_id, self.sources)

    def sources_key(self) -> dict[str, Any]:
        """The settings that decide what ``build_sources`` builds from a data folder (not where
        the folder is): a sources file built under other settings is refused."""
        h = self.hparams
        names = ("train_split", "eval_split", "use_perturbations", "train_perturbations", "eval_perturbations",
                 "max_questions", "lm_name_or_path", "lm_gguf_file", "max_tokens", "seed", "example_options",
                 "train_gold", "consensus", "labels")
        key = {n: h.get(n) for n in names}
        key["predictions"] = _spec_names(h.predictions)
        key["train_predictions"] = _spec_names(h.train_predictions)
        return key

    def _eval_examples(self) -> list:
        return self.sources["eval_predicted"] or self.sources["eval_perturbed"]

    # ------------------------------------------------------------------ protocols

    def fold_of_db(self) -> dict[str, int]:
        """crossfit: the fold of every eval database (``model.data.folds.schema_disjoint_folds``)."""
        from model.data.folds import check_folds, schema_disjoint_folds

        self.build_sources()
        db_ids = [e.db_id for e in self._eval_examples()]
        check_folds(db_ids, self.hparams.folds)
        folds = schema_disjoint_folds(db_ids, self.hparams.folds, self.hparams.split_seed)
        return {db: int(f) for db, f in zip(db_ids, folds)}

    def use_fold(self, fold: int) -> None:
        """crossfit: test = fold ``fold``, validation = the next fold, train = the rest."""
        from model.data.folds import crossfit_roles

        roles = crossfit_roles(fold, self.hparams.folds)
        role_of = {f: name for name, fs in roles.items() for f in fs}
        self.fold = fold
        self._assign({db: role_of[f] for db, f in self.fold_of_db().items()})

    def _assign(self, db_split: dict[str, str]) -> None:
        """``self.datasets`` from the sources for one division of the eval databases."""
        h = self.hparams
        self.db_split = db_split
        have_predictions = bool(self.sources["eval_predicted"])
        if h.holdout_system:
            check_holdout_system(h.holdout_system, [e.system for e in self.sources["eval_predicted"]])

        def where(example) -> str:  # dbs only in train_split are training dbs
            return db_split.get(example.db_id, "train")

        out: dict[str, list] = {s: [] for s in SPLITS}
        for e in self.sources["train_side"]:
            if where(e) == "train":  # drop train-split questions on val/test dbs: schema-disjoint
                out["train"].append(e)
        for e in self.sources["eval_perturbed"]:
            if where(e) == "train" or not have_predictions:
                out[where(e)].append(e)
        for e in self.sources["eval_predicted"]:
            if not holdout_keeps(e.system, where(e), h.holdout_system):
                continue  # leave one system out: never trained or validated on, the only one tested
            if where(e) != "train" or h.use_predictions:
                out[where(e)].append(e)
        empty = [s for s in SPLITS if not out[s]]
        if empty:
            raise ValueError(
                f"no examples for split(s) {empty} (root {self.root}, {len(set(db_split))} eval dbs, "
                f"use_predictions={h.use_predictions}, use_perturbations={h.use_perturbations})"
            )
        if h.dedupe_train:
            out["train"] = dedupe(out["train"])
        self.datasets = out

    def _build(self) -> dict[str, list]:
        """Node examples (not tokenized) per source: ``eval_predicted``, ``eval_perturbed``, ``train_side``."""
        from model.nodes.examples import build_examples

        h = self.hparams
        root = self.root
        options = {"labels": h.get("labels", "execution"), **(h.example_options or {})}
        files = self.prediction_files()  # val/test are always real predictions when there are any
        have_predictions = bool(files)

        def build(split: str, prediction_files: list[Path], perturbations: int, gold: bool = False) -> list:
            examples, report = build_examples(
                root, split, prediction_files=prediction_files, perturbations_per_query=perturbations,
                seed=h.seed, max_questions=h.max_questions, include_gold=gold, **options,
            )
            self.reports[f"{split}:{'predictions' if prediction_files else 'perturbations'}"] = report
            return list(examples)

        train_files = self.prediction_files(h.train_predictions, default=False)
        train_perturbations = h.train_perturbations if h.use_perturbations else 0
        train_side = build(h.train_split, train_files, train_perturbations, h.train_gold) if h.train_split and (
            train_files or train_perturbations or h.train_gold) else []
        return {
            "eval_predicted": build(h.eval_split, files, 0) if have_predictions else [],
            "eval_perturbed": build(h.eval_split, [], h.eval_perturbations) if (
                h.use_perturbations or not have_predictions) else [],
            "train_side": train_side,
        }

    # ------------------------------------------------------------------ statistics

    def train_label_counts(self) -> tuple[int, int]:
        """(wrong nodes, correct nodes) over the training examples: ``pos_weight=auto`` uses it."""
        self.setup("fit")
        labels = [label for e in self.datasets["train"] for label in e.node_labels]
        positives = sum(1 for label in labels if label == 1)
        return len(labels) - positives, positives

    def summary(self) -> dict[str, Any]:
        """Counts per split, for logs and the run directory."""
        out: dict[str, Any] = {}
        for split, examples in self.datasets.items():
            labels = [label for e in examples for label in e.node_labels]
            out[split] = {
                "examples": len(examples),
                "questions": len({e.question_id for e in examples}),
                "databases": sorted({e.db_id for e in examples}),
                "nodes": len(labels),
                "correct_node_share": sum(labels) / max(1, len(labels)),
                "systems": sorted({e.system for e in examples}),
            }
        return out

    # ------------------------------------------------------------------ loaders

    def _loader(self, split: str, shuffle: bool) -> DataLoader:
        examples = self.datasets[split]
        sampler = QuestionBatchSampler(
            [e.question_id for e in examples], self.hparams.batch_size, shuffle=shuffle,
            seed=self.hparams.seed, pad_to_equal=shuffle,
        )
        return DataLoader(
            IndexedExamples(examples), batch_sampler=sampler, num_workers=self.hparams.num_workers,
            collate_fn=Collate(self.pad_id), persistent_workers=self.hparams.num_workers > 0,
        )

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("val", shuffle=False)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", shuffle=False)

    def predict_dataloader(self) -> DataLoader:
        return self.test_dataloader()

    def split_loader(self, split: str) -> DataLoader:
        """An unsharded, ordered loader over ``split`` (writing predictions in one process)."""
        return self.loader_over(self.datasets[split])

    def loader_over(self, examples: list) -> DataLoader:
        """An unsharded, ordered loader over ``examples``; batches' ``index`` is into the list."""
        sampler = QuestionBatchSampler([e.question_id for e in examples], self.hparams.batch_size,
                                       shuffle=False, seed=0, world_size=1)
        return DataLoader(IndexedExamples(examples), batch_sampler=sampler,
                          collate_fn=Collate(self.pad_id))


# ---------------------------------------------------------------------------------------------

SOURCES_FORMAT = "rat-node-sources/1"


def write_sources(path: str | Path, key: dict, pad: int, sources: dict[str, list]) -> None:
    """The tokenized examples of every source in one gzipped JSON Lines file: a header line
    (format, settings ``key``, pad id, counts), then one example a line with its ``source``."""
    import gzip
    import json
    from dataclasses import asdict

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with gzip.open(tmp, "wt") as f:
        header = {"format": SOURCES_FORMAT, "key": key, "pad_id": pad,
                  "counts": {name: len(examples) for name, examples in sources.items()}}
        f.write(json.dumps(header) + "\n")
        for name, examples in sources.items():
            for e in examples:
                f.write(json.dumps({"source": name, **asdict(e)}) + "\n")
    tmp.replace(path)


def read_sources(path: str | Path, key: dict | None = None) -> tuple[int, dict[str, list]]:
    """(pad id, sources) of a file written by ``write_sources``; plain JSON, nothing executed.
    With ``key``, a file built under other settings is a UsageError naming the first that differs.

    >>> import tempfile, os
    >>> from model.nodes.examples import TokenizedExample
    >>> e = TokenizedExample([5, 6], [1], [1], "q1", "db", "sys", "SELECT 1", ["Project"], True)
    >>> p = os.path.join(tempfile.mkdtemp(), "s.jsonl.gz")
    >>> write_sources(p, {"max_tokens": 64}, 0, {"eval_predicted": [e], "train_side": []})
    >>> pad, sources = read_sources(p, {"max_tokens": 64}); sources["eval_predicted"] == [e], sources["train_side"]
    (True, [])
    >>> read_sources(p, {"max_tokens": 128})
    Traceback (most recent call last):
    model.errors.UsageError: data.sources_file=...s.jsonl.gz was built with max_tokens=64, not 128: delete it to rebuild
    """
    import gzip
    import json

    from model.errors import UsageError
    from model.nodes.examples import TokenizedExample

    path = Path(path)
    try:
        with gzip.open(path, "rt") as f:
            header = json.loads(f.readline())
            if header.get("format") != SOURCES_FORMAT:
                raise UsageError(f"data.sources_file={path}: not a sources file ({SOURCES_FORMAT})")
            for name, value in (key or {}).items():
                if header["key"].get(name) != value:
                    raise UsageError(f"data.sources_file={path} was built with {name}={header['key'].get(name)}, "
                                     f"not {value}: delete it to rebuild")
            sources: dict[str, list] = {name: [] for name in header["counts"]}
            for line in f:
                row = json.loads(line)
                sources[row.pop("source")].append(TokenizedExample(**row))
    except (OSError, EOFError, json.JSONDecodeError, KeyError, TypeError) as err:
        raise UsageError(f"data.sources_file={path}: cannot read it ({err})") from None
    return int(header["pad_id"]), sources


def _spec_names(spec: str | Sequence[str] | None) -> list[str] | None:
    """The file-name part of prediction globs (the folders differ between machines)."""
    if spec is None:
        return None
    return [Path(str(s)).name for s in ([spec] if isinstance(spec, (str, Path)) else spec)]


class IndexedExamples(Dataset):
    """A list of tokenized examples; items carry their index so predictions can be matched back."""

    def __init__(self, examples: list):
        self.examples = examples

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, index: int):
        return index, self.examples[index]


class Collate:
    """Right-pad a list of ``(index, TokenizedExample)`` into the batch dict the module reads."""

    def __init__(self, pad_id: int):
        self.pad_id = pad_id

    def __call__(self, items: list) -> dict[str, torch.Tensor]:
        tokens = max(len(e.input_ids) for _, e in items)
        nodes = max(len(e.node_positions) for _, e in items)
        batch = len(items)
        input_ids = torch.full((batch, tokens), self.pad_id, dtype=torch.long)  # (batch, tokens)
        attention_mask = torch.zeros((batch, tokens), dtype=torch.long)  # (batch, tokens)
        node_positions = torch.zeros((batch, nodes), dtype=torch.long)  # (batch, nodes)
        node_labels = torch.zeros((batch, nodes), dtype=torch.float)  # (batch, nodes)
        node_mask = torch.zeros((batch, nodes), dtype=torch.bool)  # (batch, nodes)
        node_weights = torch.ones((batch, nodes), dtype=torch.float)  # (batch, nodes)
        node_agreement = torch.full((batch, nodes), float("nan"))  # (batch, nodes), NaN = unknown
        for i, (_, e) in enumerate(items):
            n, m = len(e.input_ids), len(e.node_positions)
            input_ids[i, :n] = torch.tensor(e.input_ids)
            attention_mask[i, :n] = 1
            node_positions[i, :m] = torch.tensor(e.node_positions)
            node_labels[i, :m] = torch.tensor(e.node_labels, dtype=torch.float)
            node_mask[i, :m] = True
            node_weights[i, :m] = float(getattr(e, "weight", 1))
            if getattr(e, "node_agreement", None) is not None:
                node_agreement[i, :m] = torch.tensor(e.node_agreement, dtype=torch.float)
        return {
            "index": torch.tensor([i for i, _ in items]),  # (batch,) positions in the split
            "input_ids": input_ids, "attention_mask": attention_mask,
            "node_positions": node_positions, "node_labels": node_labels, "node_mask": node_mask,
            "node_weights": node_weights, "node_agreement": node_agreement,
        }


class QuestionBatchSampler(Sampler[list[int]]):
    """Batches of whole question groups (a question's predictions and perturbations together, as
    the paper batches), up to ``batch_size`` examples; a larger group is split into chunks.

    Shuffles group order per epoch (``set_epoch``, called by Lightning) and, under DDP, gives each
    process every ``world_size``-th batch; for training (``pad_to_equal``) ranks get equally many
    batches, as gradient synchronisation needs.

    >>> s = QuestionBatchSampler(["q1", "q1", "q2", "q3", "q3", "q3"], batch_size=3, shuffle=False)
    >>> list(s)
    [[0, 1, 2], [3, 4, 5]]
    """

    def __init__(self, question_ids: Sequence[str], batch_size: int, shuffle: bool = True,
                 seed: int = 0, pad_to_equal: bool = False, rank: int | None = None,
                 world_size: int | None = None):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, found {batch_size}")
        groups: dict[str, list[int]] = {}
        for index, qid in enumerate(question_ids):
            groups.setdefault(qid, []).append(index)
        self.groups = list(groups.values())
        self.batch_size, self.shuffle, self.seed, self.pad_to_equal = batch_size, shuffle, seed, pad_to_equal
        distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
        self.world_size = world_size or (torch.distributed.get_world_size() if distributed else 1)
        self.rank = rank if rank is not None else (torch.distributed.get_rank() if distributed and self.world_size > 1 else 0)
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def _all_batches(self) -> list[list[int]]:
        groups = list(self.groups)
        if self.shuffle:
            random.Random(self.seed * 1_000_003 + self.epoch).shuffle(groups)
        batches, current = [], []
        for group in groups:
            for start in range(0, len(group), self.batch_size):
                chunk = group[start : start + self.batch_size]
                if current and len(current) + len(chunk) > self.batch_size:
                    batches.append(current)
                    current = []
                current = current + chunk
        if current:
            batches.append(current)
        return batches

    def _my_batches(self) -> list[list[int]]:
        batches = self._all_batches()
        if self.world_size == 1:
            return batches
        if self.pad_to_equal:
            per_rank = -(-len(batches) // self.world_size)
            batches = batches + batches[: per_rank * self.world_size - len(batches)]
        return batches[self.rank :: self.world_size]

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self._my_batches())

    def __len__(self) -> int:
        return len(self._my_batches())


def dedupe(examples: list) -> list:
    """One example per distinct (question, input, labels, agreements), its ``weight`` the number
    of examples it stands for: the weighted loss equals the loss over all of them.

    >>> from types import SimpleNamespace as E
    >>> a = E(question_id="q", input_ids=[1, 2], node_labels=[1], node_agreement=None, weight=1)
    >>> b = E(question_id="q", input_ids=[1, 3], node_labels=[0], node_agreement=None, weight=1)
    >>> [(e.input_ids, e.weight) for e in dedupe([a, b, E(**vars(a))])]
    [([1, 2], 2), ([1, 3], 1)]
    """
    import copy

    kept: dict[tuple, Any] = {}
    for e in examples:
        agreement = getattr(e, "node_agreement", None)
        key = (e.question_id, tuple(e.input_ids), tuple(e.node_labels), tuple(agreement or ()))
        if key in kept:
            kept[key].weight += getattr(e, "weight", 1)
        else:
            kept[key] = copy.copy(e)
            kept[key].weight = getattr(e, "weight", 1)
    return list(kept.values())


def attach_agreements(examples: list) -> None:
    """Set each example's ``node_agreement`` against the other examples of its question in the
    same list (``model.nodes.features.node_agreements``); None where it is the only one."""
    from model.nodes.features import node_agreements

    for e, agreement in zip(examples, node_agreements(examples)):
        e.node_agreement = None if agreement is None else [round(float(a), 6) for a in agreement]


def pad_id(tokenizer) -> int:
    for candidate in (tokenizer.pad_token_id, tokenizer.eos_token_id, 0):
        if candidate is not None:
            return int(candidate)
    return 0
