"""Cold start of the scorer: the wall time of a fresh ``python -c "from model import Scorer;
Scorer.pretrained().score(...)"`` in the core install (the package's wheel without extras, in its
own virtualenv) and in the full install (``.venv``), side by side, interleaved, median of
``--repeats`` runs each; with the process's CPU time (user + system), which a loaded machine
stretches less than the wall time.

    .venv/bin/python benchmarks/cold_start.py [--repeats 7] [--core-venv DIR] [--rebuild]

The core virtualenv is built once under ``<cache>/core_venv`` (``$RAT_CACHE``, else the
checkout's ``.cache``); every run reinstalls the checkout's wheel into it (no dependencies), so
both installs run the same code.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from model.data.cache import cache_dir

COMMAND = ("from model import Scorer; Scorer.pretrained().score("
           "'SELECT name FROM singer WHERE age > 20', question='Names of singers older than 20?', "
           "schema={'singer': ['singer_id', 'name', 'age']})")


def _run(cmd: list, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    done = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        sys.exit(f"cold_start: {' '.join(map(str, cmd[:4]))} ... failed:\n{done.stderr[-2000:]}")
    return done


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def build_wheel(work: Path, env: dict) -> Path:
    """The checkout's wheel, built under ``work`` from a copy of the package's files (a build in
    the checkout leaves a build/ folder whose stale modules enter every later wheel)."""
    source = work / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, source / name)
    for package in ("rat", "model"):
        shutil.copytree(REPO / package, source / package,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", work / "wheel", source],
         work, env)
    (wheel,) = (work / "wheel").glob("rat_confidence-*.whl")
    return wheel


def core_venv(path: Path, rebuild: bool, env: dict) -> Path:
    """The core virtualenv at ``path`` with the checkout's current wheel (built on first use)."""
    python = path / "bin" / "python"
    with tempfile.TemporaryDirectory() as tmp:
        wheel = build_wheel(Path(tmp), env)
        if rebuild or not python.is_file():
            _run([sys.executable, "-m", "venv", "--clear", path], Path(tmp), env)
            _run([python, "-m", "pip", "install", "-q", wheel], Path(tmp), env)
        else:
            _run([python, "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", wheel],
                 Path(tmp), env)
    listed = _run([python, "-m", "pip", "list"], path, env).stdout.lower().split()
    if "torch" in listed:
        sys.exit(f"cold_start: {path} has torch installed: not a core install (use --rebuild)")
    return python


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--core-venv", type=Path, default=None, help="default: <cache>/core_venv")
    parser.add_argument("--full-python", type=Path, default=REPO / ".venv" / "bin" / "python")
    parser.add_argument("--rebuild", action="store_true", help="recreate the core virtualenv")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    if not args.full_python.is_file():
        parser.error(f"--full-python {args.full_python}: no such file (make setup)")

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               PIP_DISABLE_PIP_VERSION_CHECK="1")
    core = core_venv(args.core_venv or cache_dir("core_venv"), args.rebuild, env)
    pythons = {"core install": core, "full install (.venv)": args.full_python}
    times: dict[str, list[float]] = {name: [] for name in pythons}
    cpu: dict[str, list[float]] = {name: [] for name in pythons}
    with tempfile.TemporaryDirectory() as cwd:  # not the checkout: the core run imports its wheel
        env["RAT_CACHE"] = cwd
        for _ in range(args.repeats):
            for name, python in pythons.items():
                used, start = _children_cpu(), time.perf_counter()
                _run([python, "-c", COMMAND], Path(cwd), env)
                times[name].append(time.perf_counter() - start)
                cpu[name].append(_children_cpu() - used)

    print(f"cold `python -c \"from model import Scorer; Scorer.pretrained().score(...)\"`, "
          f"median of {args.repeats}, {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f}")
    print(f"  {'':22s} {'wall (min-max)':>20s} {'CPU':>8s}")
    medians = {name: statistics.median(ts) for name, ts in times.items()}
    for name, ts in times.items():
        print(f"  {name:22s} {medians[name]:6.2f} s ({min(ts):.2f}-{max(ts):.2f}) "
              f"{statistics.median(cpu[name]):6.2f} s")
    core_median, full_median = medians.values()
    print(f"  full / core            {full_median / core_median:6.2f}x")


if __name__ == "__main__":
    from model.errors import user_errors

    with user_errors():  # a data root of another layout: one line
        main()
