"""The file format of a saved boosted node model: what ``BoostedNodeModel.save`` writes to a
directory (a ``model=features`` run's ``<run>/model/``) and ``BoostedNodeModel.load`` reads.

A model directory holds ``model.json`` (format and feature version, calibrators, typical feature
values for the reasons, what it was trained on, its out-of-fold and in-sample metrics) and the
gradient-boosted models as skops files (``node_model.skops``, ``site_model.skops``). skops
loads only the types listed in ``TRUSTED_TYPES``; a file asking for anything else is refused,
so loading a downloaded model never runs code from it (plain pickle would).

This module knows the format and nothing about training or evaluation.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from model.calibrators import QUERY_FEATURES, Calibrator, QueryCalibrator, load_calibrator
from model.data.jsonl import read_json, write_json
from model.errors import ModelFileError, UsageError

FORMAT = "rat-confidence boosted node scorer"
FORMAT_VERSION = 1
# What skops may rebuild beside scikit-learn's and numpy's own trusted types. A model file that
# needs anything else is refused (ModelFileError), never loaded.
TRUSTED_TYPES = (
    "functools.partial",
    "sklearn.ensemble._hist_gradient_boosting.predictor.TreePredictor",
    "sklearn.utils.validation.check_array",
)
# What a skops file may inflate to, checked in its zip directory before anything of it is read
# (a few MB of deflated zeros can inflate to gigabytes): all its members, its schema.json, how many
# members. The packaged models' files hold 1 to 2.5 MB in about 500 to 1,000 members.
MAX_SKOPS_BYTES = 256 << 20
MAX_SCHEMA_BYTES = 64 << 20
MAX_SKOPS_MEMBERS = 100_000
# The parts of a saved model, as write_model takes them and read_model returns them.
PARTS = ("node_model", "site_model", "calibrator", "query_calibrator", "features", "typical", "info",
         "without_database")


def write_model(folder: str | Path, *, node_model: Any, site_model: Any | None, calibrator: Calibrator | None,
                query_calibrator: QueryCalibrator, features: tuple[str, ...], typical: dict, info: dict,
                without_database: tuple[Calibrator | None, QueryCalibrator] | None = None) -> Path:
    """Write a model directory: the skops files and ``model.json``, whole or not at all
    (``write_folder``)."""
    sio = _skops_io()

    def write(into: Path) -> None:
        sio.dump(node_model, into / "node_model.skops")
        if site_model is not None:
            sio.dump(site_model, into / "site_model.skops")
        write_json(into / "model.json", {
            "format": FORMAT, "format_version": FORMAT_VERSION, **info,
            "features": list(features),
            "calibrator": calibrator.to_dict() if calibrator is not None else None,
            "query_calibrator": query_calibrator.to_dict(),
            "typical": typical,
            **({"without_database": {
                "calibrator": without_database[0].to_dict() if without_database[0] is not None else None,
                "query_calibrator": without_database[1].to_dict()}}
               if without_database is not None else {}),
        })

    folder = Path(folder)
    write_folder(folder, write)
    return folder


def write_folder(folder: Path, write: Callable[[Path], None]) -> None:
    """A folder written whole or not at all: ``write(new)`` fills a new folder beside it, which
    then takes its place (the old one, if any, renamed aside and removed). A write that fails (a
    full disk, an interrupt) leaves the old folder as it was and no partial one; nothing of the
    old folder is kept in the new (no stale file). A link to a folder stays a link: its folder is
    replaced. Only an empty folder or a model's (one with ``model.json``) is replaced: any other
    (``--out .``, a run's folder) is a ``ModelFileError``, nothing written."""
    folder = Path(folder).resolve()  # (a link's folder; `.` or `..` by their names)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir()) and not (folder / "model.json").is_file()):
        # (`--out .` or a run's folder would be replaced whole: only a model's folder or an empty one is)
        raise ModelFileError(f"{folder}: exists and holds no model (no model.json): not replaced; "
                             "give a new folder or a model's")
    folder.parent.mkdir(parents=True, exist_ok=True)
    new, old = (folder.with_name(f".{folder.name}.{os.getpid()}.{end}") for end in ("new", "old"))
    for leftover in (new, old):  # (of an earlier run of this process id, killed)
        shutil.rmtree(leftover, ignore_errors=True)
    aside = False
    try:
        new.mkdir()
        write(new)
        if folder.exists():
            os.chmod(new, stat.S_IMODE(folder.stat().st_mode))
            folder.rename(old)
            aside = True
        new.rename(folder)
    except BaseException:
        if aside:
            old.rename(folder)
        shutil.rmtree(new, ignore_errors=True)
        raise
    if aside:
        shutil.rmtree(old, ignore_errors=True)


def read_model(folder: str | Path) -> dict[str, Any]:
    """Read a model directory into its ``PARTS``; ``ModelFileError`` (one line) when it cannot be
    used: not a model directory, another format or feature version, an unreadable skops file or
    one that asks for a type outside ``TRUSTED_TYPES``."""
    from model.nodes.features import READ_BY, VERSION

    folder = Path(folder)
    meta_path = folder / "model.json"
    if not meta_path.is_file():
        raise ModelFileError(f"{folder}: no model.json (expected a directory written by a "
                             "model=features run, <run>/model)")
    try:
        meta = read_json(meta_path)
    except UsageError as e:  # (not UTF-8, not JSON, nested too deeply, a number of thousands of digits)
        raise ModelFileError(str(e)) from None
    if not isinstance(meta, dict):
        raise ModelFileError(f"{meta_path}: expected a JSON object, found {type(meta).__name__}")
    if meta.get("format") != FORMAT or meta.get("format_version") != FORMAT_VERSION:
        raise ModelFileError(f"{meta_path}: not a {FORMAT} of format version {FORMAT_VERSION} "
                             f"(found {meta.get('format')!r} version {meta.get('format_version')!r})")
    if meta.get("feature_version") not in READ_BY:
        raise ModelFileError(
            f"{folder}: saved with node features {meta.get('feature_version')!r}, this version "
            f"computes {VERSION!r} (read by models of {', '.join(READ_BY)}); retrain it "
            f"(python train.py model=features ...)")
    parts = _checked_parts(meta, meta_path)  # every part of model.json, before any skops file
    if "policy" in meta:  # the run / review / regenerate thresholds (model.scoring.verdict)
        from model.nodes.policy import Policy

        try:
            Policy.from_dict(meta["policy"])
        except (ValueError, TypeError) as e:
            raise ModelFileError(f"{meta_path}: policy: {e}") from None
    _check_card(meta, meta_path)
    features = parts["features"]
    node_model = load_skops(folder / "node_model.skops")
    reads = getattr(node_model, "n_features_in_", len(features))
    if reads != len(features):
        raise ModelFileError(f"{meta_path}: features: {len(features)} names, but the node model "
                             f"reads {reads} features")
    _check_classes(node_model, folder / "node_model.skops")
    _check_trees(node_model, folder / "node_model.skops")
    site_path = folder / "site_model.skops"
    site_model = None
    if site_path.is_file() or _has_site_head(meta):  # (missing: one line from load_skops)
        site_model = load_skops(site_path)
        _check_classes(site_model, site_path)
        width = len(features)
        if meta.get("config", {}).get("site_context"):
            from model.nodes.sites import context_names

            width += len(context_names(features))
        if getattr(site_model, "n_features_in_", width) != width:
            raise ModelFileError(f"{site_path}: reads {site_model.n_features_in_} features; this model's site head "
                                 f"reads {width} (features{' and their context' if width > len(features) else ''})")
        _check_trees(site_model, site_path)
    return {"node_model": node_model, "site_model": site_model, **parts,
            "info": {k: v for k, v in meta.items()
                     if k not in ("features", "calibrator", "typical", "query_calibrator", "without_database")}}


def _has_site_head(meta: dict) -> bool:
    """Whether a model's card says it has a site head: its config's ``site_head`` (written since
    it is saved), else (an older card) a "look here first" reliability measured on site scores."""
    site_head = meta.get("config", {}).get("site_head")
    if isinstance(site_head, bool):
        return site_head
    return any(bins for bins in meta.get("pointer_reliability", {}).values())


def _check_classes(model: Any, path: Path) -> None:
    """A node or site model predicts 0 (wrong) and 1 (right): ``predict_proba(x)[:, 1]`` is read
    as P(right); another classifier's second column means something else."""
    classes = getattr(model, "classes_", None)
    if classes is None or len(classes) != 2 or [int(c) if isinstance(c, (bool, int, np.integer)) else c
                                                  for c in classes] != [0, 1]:
        shown = "none" if classes is None else ", ".join(map(str, list(classes)[:5]))
        raise ModelFileError(f"{path}: predicts classes {shown}, not 0 and 1 (wrong, right)")


def _check_trees(model: Any, path: Path) -> None:
    """A node or site model is a ``HistGradientBoostingClassifier`` (what this project fits; skops
    trusts other classifiers of scikit-learn's, whose compiled code reads their arrays unchecked)
    whose trees can be walked safely (``model.nodes.compiled.trees_problem``: every index in
    range, no loop, finite leaf values); checked before any prediction."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    from model.nodes.compiled import trees_problem

    if not isinstance(model, HistGradientBoostingClassifier):
        raise ModelFileError(f"{path}: holds a {type(model).__name__}, not a HistGradientBoostingClassifier")
    problem = trees_problem(model)
    if problem is not None:
        raise ModelFileError(f"{path}: {problem}")


def _check_card(meta: dict, meta_path: Path) -> None:
    """The parts of ``model.json`` scoring reads besides the calibrators: ``config`` (an object),
    ``pointer_reliability`` (bins of ``lo``, ``hi``, ``top1`` numbers), ``quantiles``, and the rates
    label shift reads (``_check_rates``); the first malformed one is one ``ModelFileError`` line
    naming it."""
    from model.nodes.quantiles import Quantiles

    if not isinstance(meta.get("config", {}), dict):
        raise ModelFileError(f"{meta_path}: config: expected an object")
    for field in ("method", "query_label", "query_label_without_database", "feature_version"):  # printed as they are
        value = meta.get(field)
        if value is not None and (not isinstance(value, str) or len(value) > 200
                                  or any(unicodedata.category(c) in ("Cc", "Cf") for c in value)):
            raise ModelFileError(f"{meta_path}: {field}: expected a short line of printable text")
    reliability = meta.get("pointer_reliability", {})
    number = (int, float)
    if not isinstance(reliability, dict) or not all(
            isinstance(bins, list) and all(isinstance(b, dict) and all(
                isinstance(b.get(k), number) and not isinstance(b.get(k), bool) and 0 <= b[k] <= 1
                for k in ("lo", "hi", "top1")) for b in bins) for bins in reliability.values()):
        raise ModelFileError(f"{meta_path}: pointer_reliability: expected {{with_database: [{{lo, hi, top1}}, ...]}}, "
                             "each in [0, 1]")
    _check_rates(meta, meta_path)
    if "quantiles" in meta:
        try:
            quantiles = Quantiles.from_dict(meta["quantiles"])
            quantiles.transform(np.zeros((1, len(quantiles.features))), list(quantiles.features))
        except Exception as e:  # noqa: BLE001  (junk in any field)
            raise ModelFileError(f"{meta_path}: quantiles: cannot be read ({type(e).__name__})") from None


def _check_rates(meta: dict, meta_path: Path) -> None:
    """The rates and counts ``model.label_shift`` (and ``rat-adapt --label-shift``, of a teacher)
    divide and compare: ``query_rate`` / ``query_rate_without_database`` numbers strictly between
    0 and 1, the counts of ``trained_on`` and ``recalibrated_on`` (and its ``pairs``') whole
    numbers, 0 or more, none above its total, and their labels short printable text; the first
    malformed one is one ``ModelFileError`` line naming its key."""
    def bad(key: str, problem: str) -> ModelFileError:
        return ModelFileError(f"{meta_path}: {key}: {problem}")

    def count(value) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0

    for key in ("query_rate", "query_rate_without_database"):
        rate = meta.get(key)
        if rate is not None and not (isinstance(rate, (int, float)) and not isinstance(rate, bool)
                                     and np.isfinite(rate) and 0 < rate < 1):
            raise bad(key, "expected a number between 0 and 1 (the share of right queries)")
    recalibrated = meta.get("recalibrated_on")
    pairs = recalibrated.get("pairs") if isinstance(recalibrated, dict) else None
    # (where, its object, (count, its total) pairs, the key of its label: read as text)
    counted = [("trained_on", meta.get("trained_on"), (("correct_queries", "examples"), ("correct_nodes", "nodes")),
                "labels"),
               ("recalibrated_on", recalibrated, (("right_queries", "queries"), ("with_database", "queries")), None)]
    if isinstance(pairs, dict):
        counted += [("recalibrated_on.pairs" + (f".{name}" if name in ("with database", "without database", "all") else ""), pair, (("right_queries", "queries"),), "label")
                    for name, pair in pairs.items()]
    elif pairs is not None:
        raise bad("recalibrated_on.pairs", "expected an object")
    for where, part, sums, label in counted:
        if part is None:
            continue
        if not isinstance(part, dict):
            raise bad(where, "expected an object")
        for some, total in sums:
            for key in (some, total):
                if part.get(key) is not None and not count(part[key]):
                    raise bad(f"{where}.{key}", "expected a whole number, 0 or more")
            if part.get(some) is not None and part.get(total) is not None and part[some] > part[total]:
                raise bad(f"{where}.{some}", f"{part[some]}, more than its {total} ({part[total]})")
        value = part.get(label) if label else None
        if value is not None and (not isinstance(value, str) or len(value) > 200
                                  or any(unicodedata.category(c) in ("Cc", "Cf") for c in value)):
            raise bad(f"{where}.{label}", "expected a short line of printable text")
    refitted = recalibrated.get("refitted") if isinstance(recalibrated, dict) else None
    if refitted is not None and not (isinstance(refitted, list) and all(isinstance(r, str) for r in refitted)):
        raise bad("recalibrated_on.refitted", "expected a list of calibrator pairs")


def _checked_parts(meta: dict, meta_path: Path) -> dict[str, Any]:
    """The calibrators, features and typical values of ``model.json``, each checked (the
    calibrators by calibrating a few probabilities); the first missing or malformed part is one
    ``ModelFileError`` line naming it."""
    def bad(part: str, problem: str) -> ModelFileError:
        return ModelFileError(f"{meta_path}: {part}: {problem}")

    features = meta.get("features")
    if not isinstance(features, list) or not features or not all(isinstance(f, str) for f in features):
        raise bad("features", "missing" if features is None else "expected a non-empty list of feature names")
    problem = _features_problem(features, meta.get("feature_version"))
    if problem:
        raise bad("features", problem)
    typical = meta.get("typical", {})
    if not isinstance(typical, dict) or not all(
            isinstance(v, dict) and all(isinstance(n, str) and isinstance(x, (int, float)) and not isinstance(x, bool)
                                        for n, x in v.items()) for v in typical.values()):
        raise bad("typical", "expected {kind group: {feature: number}}")

    def calibrators(where: dict, prefix: str) -> tuple[Calibrator | None, QueryCalibrator]:
        saved = where.get("calibrator")
        calibrator = None
        if saved is not None:
            try:
                calibrator = load_calibrator(saved)
                fine = np.isfinite(np.asarray(calibrator.confidence(np.array([0.1, 0.5, 0.9])), dtype=float)).all()
            except ValueError as e:  # (load_calibrator's checks name the field)
                raise bad(f"{prefix}calibrator", f"cannot be read ({str(e).splitlines()[0][:200]})") from None
            except Exception as e:  # noqa: BLE001  (junk in any field: each calibrator fails its own way)
                raise bad(f"{prefix}calibrator", f"cannot be read ({type(e).__name__})") from None
            if not fine:
                raise bad(f"{prefix}calibrator", "gives no probabilities")
        query = where.get("query_calibrator")
        if not isinstance(query, dict):
            raise bad(f"{prefix}query_calibrator", "missing" if query is None else "expected an object")
        try:
            calibrated = _query_calibrator(query, meta_path)
            fine = np.isfinite(calibrated.confidence(np.zeros((1, len(QUERY_FEATURES))))).all()
        except ModelFileError:
            raise
        except Exception:  # noqa: BLE001  (a missing or junk coef / intercept)
            fine = False
        if not fine:
            raise bad(f"{prefix}query_calibrator", f"expected {len(QUERY_FEATURES)} coef numbers and an intercept")
        return calibrator, calibrated

    calibrator, query_calibrator = calibrators(meta, "")
    without = meta.get("without_database")
    if without is not None:
        if not isinstance(without, dict):
            raise bad("without_database", "expected an object")
        without = calibrators(without, "without_database.")
    return {"calibrator": calibrator, "query_calibrator": query_calibrator, "features": tuple(features),
            "typical": typical, "without_database": without}


def _features_problem(features: list[str], version: str) -> str | None:
    """What is wrong with a model's ``features``: a name twice, a name its feature version does not
    define, or names out of the order the features are computed in (``build_features``: the
    single track's, the LM's, the consensus track's, each in ``FEATURES`` order), the order of
    the node model's columns; None when nothing. (Every version in ``READ_BY`` names and orders
    its features as this one.)"""
    from model.nodes.features import CONSENSUS_FEATURES, LM_FEATURES, SINGLE_FEATURES

    twice = next((f for k, f in enumerate(features) if f in features[:k]), None)
    if twice is not None:
        return f"{twice} is named twice"
    position = {name: k for k, name in enumerate(SINGLE_FEATURES + LM_FEATURES + CONSENSUS_FEATURES)}
    unknown = next((f for f in features if f not in position), None)
    if unknown is not None:
        return f"{unknown[:60]!r} is no feature of {version}"
    if [position[f] for f in features] != sorted(position[f] for f in features):
        return "not in the order this version computes them (the node model's columns would be misread)"
    return None


def _query_calibrator(saved: dict, meta_path: Path) -> QueryCalibrator:
    if saved.get("features") != list(QUERY_FEATURES):
        raise ModelFileError(f"{meta_path}: whole-query calibrator reads {saved.get('features')}, this "
                             f"version {list(QUERY_FEATURES)}; retrain it")
    return QueryCalibrator(saved["coef"], saved["intercept"])


def _skops_io():
    """``skops.io``, imported without torch: it lists scikit-learn's estimators by walking every
    scikit-learn package, one of which (``externals.array_api_compat.torch``) imports torch where
    it is installed (about 180 MB and a second or two for a scorer that never uses it). Blocked
    for that import, torch's package is skipped as one that is not installed."""
    import sys

    if "skops.io" in sys.modules or "torch" in sys.modules:
        import skops.io

        return skops.io
    sys.modules["torch"] = None  # `import torch` raises ImportError, which the walk ignores
    try:
        import skops.io
    finally:
        if sys.modules.get("torch", 0) is None:
            del sys.modules["torch"]
    return skops.io


def load_skops(path: Path):
    """The classifier of a skops file; ``ModelFileError`` (one line) when it is missing, inflates
    past the caps (``_check_sizes``), cannot be read, asks for a type outside ``TRUSTED_TYPES``
    or holds no classifier."""
    sio = _skops_io()

    if not path.is_file():
        raise ModelFileError(f"{path}: missing")
    _check_sizes(path)
    try:
        untrusted = sio.get_untrusted_types(file=path)
    except Exception as e:  # noqa: BLE001  (a damaged or foreign file: skops raises several kinds)
        raise ModelFileError(f"{path}: not a readable skops file ({type(e).__name__})") from None
    refused = sorted(set(untrusted) - set(TRUSTED_TYPES))
    if refused:
        named = _functions_named(path) if "builtins.function" in refused else []
        if named:  # skops calls every function "builtins.function": name the ones the file asks for
            refused = sorted(set(refused) - {"builtins.function"} | {f"function {n}" for n in named})
        raise ModelFileError(f"{path}: refers to types this project does not trust: {', '.join(refused)}")
    try:
        loaded = sio.load(path, trusted=list(untrusted))
    except Exception as e:  # noqa: BLE001  (a damaged member of a readable file: numpy, zip, skops errors)
        raise ModelFileError(f"{path}: not a readable skops file ({type(e).__name__})") from None
    if not callable(getattr(loaded, "predict_proba", None)):  # (a type skops trusts, not a classifier)
        raise ModelFileError(f"{path}: holds a {type(loaded).__name__}, not a classifier")
    return loaded


def _check_sizes(path: Path) -> None:
    """A skops file whose zip directory says it inflates past ``MAX_SKOPS_BYTES`` (all members),
    ``MAX_SCHEMA_BYTES`` (its schema.json) or holds over ``MAX_SKOPS_MEMBERS`` members is a
    ``ModelFileError`` naming the file and its largest member, before any member is read (zip
    reads no more of a member than its directory says it holds)."""
    import zipfile

    if path.stat().st_size > MAX_SKOPS_BYTES:
        raise ModelFileError(f"{path}: {path.stat().st_size >> 20} MiB, over the {MAX_SKOPS_BYTES >> 20} MiB a "
                             "model file may hold")
    try:
        with zipfile.ZipFile(path) as z:
            members = z.infolist()
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, NotImplementedError) as e:
        raise ModelFileError(f"{path}: not a readable skops file ({type(e).__name__})") from None
    if len(members) > MAX_SKOPS_MEMBERS:
        raise ModelFileError(f"{path}: {len(members)} members, over the {MAX_SKOPS_MEMBERS} a model file may hold")
    schema = max((m.file_size for m in members if m.filename == "schema.json"), default=0)
    if schema > MAX_SCHEMA_BYTES:
        raise ModelFileError(f"{path}: its schema.json inflates to {schema >> 20} MiB, over the "
                             f"{MAX_SCHEMA_BYTES >> 20} MiB a model file's may")
    total = sum(m.file_size for m in members)
    if total > MAX_SKOPS_BYTES:
        largest = max(members, key=lambda m: m.file_size)
        raise ModelFileError(f"{path}: its members inflate to {total >> 20} MiB (the largest, {largest.filename[:80]!r}, "
                             f"{largest.file_size >> 20} MiB), over the {MAX_SKOPS_BYTES >> 20} MiB a model file may")


def _functions_named(path: Path) -> list[str]:
    """The ``module.function`` each function node of a skops file names (its schema.json)."""
    import zipfile

    found: list[str] = []

    def walk(node, depth: int = 0) -> None:
        if depth > 200 or len(found) > 20:
            return
        if isinstance(node, dict):
            content = node.get("content")
            if node.get("__loader__") == "FunctionNode" and isinstance(content, dict):
                found.append(f"{content.get('module_path')}.{content.get('function')}")
            for value in node.values():
                walk(value, depth + 1)
        elif isinstance(node, list):
            for value in node:
                walk(value, depth + 1)

    try:
        with zipfile.ZipFile(path) as z:
            walk(json.loads(z.read("schema.json")))
    except (OSError, KeyError, ValueError, RecursionError, zipfile.BadZipFile):
        return []
    return sorted(set(found))
