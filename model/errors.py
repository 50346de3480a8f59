"""The errors a user sees: each is a mistake in an input, told in one line that names it.

Commands turn them into ``prog: error: <message>`` and exit code 2 (``user_errors``);
the service turns them into a 4xx with the message. Library code raises these, never prints.

>>> issubclass(ModelFileError, UsageError) and issubclass(UsageError, ValueError)
True
>>> str(PredictionFileError("runs/a.json", "expected an object or a list, found int"))
'runs/a.json: expected an object or a list, found int'
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["AdaptError", "ModelFileError", "PredictionFileError", "RecalibrationError", "UsageError",
           "check_writable", "leave_interrupts_to_the_parent", "quiet_closed_pipes", "say_error", "start_pool",
           "user_errors"]

class UsageError(ValueError):
    """A mistake in a command line or in an input file, told to the user in one line."""


class ModelFileError(UsageError):
    """A model directory that cannot be used: missing, another feature version, untrusted types."""


class PredictionFileError(UsageError):
    """A prediction file that cannot be read as its format says; the message names the file."""

    def __init__(self, path: Path | str, problem: str):
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}")


class AdaptError(UsageError):
    """Models or outputs adaptation cannot use (a teacher that reads no other answers...);
    ``argument``: which of ``adapt``'s is at fault (``model``, ``teacher``), where one is."""

    def __init__(self, message: str, argument: str | None = None):
        super().__init__(message)
        self.argument = argument


class RecalibrationError(UsageError):
    """A labelled sample recalibration cannot use (no right or no wrong node, no gold...)."""


@contextmanager
def user_errors(prog: str | None = None, run_dir: str | Path | None = None) -> Iterator[None]:
    """Turn ``UsageError`` (a config object's own check while Hydra builds it too), a missing file
    (a ``data.root`` that is no dataset, a ``run_dir`` without its predictions, an LM that is not
    installed when Hydra builds the model), a missing mandatory Hydra value and Lightning's
    refusal of a setting while Hydra builds it (its
    ``MisconfigurationException``, told with the config key) into ``prog: error: ...`` on
    stderr and exit code 2; ``run_dir``, when it holds nothing but Hydra's own records, is
    removed so that a mistake leaves no junk run directory behind. ``prog``: the command's name
    (default: the script's, as argparse names it)."""
    from hydra.errors import InstantiationException
    from omegaconf.errors import MissingMandatoryValue

    try:
        yield
    except (UsageError, FileNotFoundError, MissingMandatoryValue, InstantiationException) as e:
        message = e
        if isinstance(e, InstantiationException):  # a config object's own check, e.g. data.protocol
            if isinstance(e.__cause__, (UsageError, FileNotFoundError)):  # or its missing file (an LM)
                message = e = e.__cause__
            elif type(e.__cause__).__name__ == "MisconfigurationException":  # e.g. trainer.devices
                key = str(e).rstrip().rsplit("full_key: ", 1)[-1] if "full_key: " in str(e) else "config"
                message = f"{key}: {e.__cause__}"
            else:
                raise
        if isinstance(e, MissingMandatoryValue):
            key = getattr(e, "full_key", None) or "a value"
            message = f"{key} is required (set it on the command line: {key}=...)"
        say_error(prog or os.path.basename(sys.argv[0]), message)
        _remove_if_only_records(run_dir)
        raise SystemExit(2) from None


def say_error(prog: str, error: BaseException | str) -> None:
    r"""``prog: error: <message>`` on stderr: the first line of ``error`` (its class's name when
    it says nothing), ``rat.text.printable`` (a message quoting a query or a path shows no
    escape sequence). The one way every command tells a mistake.

    >>> import contextlib, io; err = io.StringIO()
    >>> with contextlib.redirect_stderr(err): say_error("rat-score", UsageError("--sql: '\x1b[2J'\nmore"))
    >>> err.getvalue()
    "rat-score: error: --sql: '�[2J'\n"
    """
    from rat.text import printable

    text = str(error)
    message = text.splitlines()[0] if text.strip() else type(error).__name__
    print(f"{prog}: error: {printable(message)}", file=sys.stderr)


@contextmanager
def quiet_closed_pipes() -> Iterator[None]:
    """A command read by a reader that stops early (``rat-score ... | head -1``) ends as a Unix
    tool does: once its standard output is closed, it stops with exit status 141 (as if killed by
    SIGPIPE) and no traceback; a message to a closed standard error is dropped and the work goes
    on, so that its files (``--out``, ``--report``, a model) are still written. A closed stream is
    pointed at /dev/null (the Python docs' note on SIGPIPE), so that nothing fails again at exit.
    Interrupted, it ends as one too: Ctrl-C with one line and exit status 130, SIGTERM with 143,
    each after the work's own clean-up has run (worker processes ended, no half-written file put
    in place of an old one), not with a traceback of each process. Used as a decorator on each
    command's ``main``."""
    import signal
    import threading

    stderr = sys.stderr
    sys.stderr = _DroppedWhenClosed(stderr)
    main = threading.current_thread() is threading.main_thread()
    terminate = signal.signal(signal.SIGTERM, _terminated) if main else None
    try:
        yield
        sys.stdout.flush()  # (what is still buffered fails here, not at exit)
    except BrokenPipeError:
        _to_devnull(sys.stdout)
        raise SystemExit(141) from None
    except KeyboardInterrupt:
        print(f"\n{Path(sys.argv[0]).name}: interrupted", file=sys.stderr)
        raise SystemExit(130) from None
    finally:
        sys.stderr = stderr
        if main:
            signal.signal(signal.SIGTERM, terminate)


def _terminated(signum, frame) -> None:
    raise SystemExit(128 + signum)


def start_pool(context, processes: int, initializer=None, initargs: tuple = ()):
    """``context.Pool(processes)`` (``context``: a ``multiprocessing`` context, fork or spawn;
    ``initializer(*initargs)`` run in each worker after its signals are set)
    whose workers leave Ctrl-C to this process from their first instruction on: SIGINT is
    blocked here while they start (a signal mask is inherited through fork and kept through
    exec), so that one sent to the process group before a worker's initializer has run waits,
    and is then dropped (``leave_interrupts_to_the_parent``) rather than killing that worker
    with a traceback. This process's own mask is as before once the pool has started (the
    pool's threads, which start any worker that replaces one, keep SIGINT blocked)."""
    import multiprocessing.context
    import signal

    block = hasattr(signal, "pthread_sigmask")
    if block and not isinstance(context, multiprocessing.context.ForkContext):
        # (a spawned pool's resource tracker) started first: its start unblocks SIGINT here
        from multiprocessing import resource_tracker

        resource_tracker.ensure_running()
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT}) if block else None
    try:
        return context.Pool(processes, initializer=_start_worker, initargs=(initializer, initargs))
    finally:
        if block:
            signal.pthread_sigmask(signal.SIG_SETMASK, before)


def _start_worker(initializer, initargs: tuple) -> None:
    leave_interrupts_to_the_parent()
    if initializer is not None:
        initializer(*initargs)


def leave_interrupts_to_the_parent() -> None:
    """A worker process's start (``multiprocessing.Pool(initializer=..)``, see ``start_pool``):
    Ctrl-C, sent to the whole process group, is the parent's to handle, which ends the workers;
    each would otherwise print a traceback of its own. It is ignored first, then unblocked (one
    that came while the worker started is dropped). SIGTERM ends it at once, as by default (the
    parent's handler, inherited through a fork, would only mark it, and a worker held on its
    queue's lock would then never end: the parent waits for it at the end of the pool)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


class _DroppedWhenClosed:
    """A text stream whose writes go to /dev/null once its reader has gone (a closed pipe)."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            _to_devnull(self._stream)
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            _to_devnull(self._stream)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def _to_devnull(stream) -> None:
    """``stream``'s file descriptor pointed at /dev/null (nothing for a stream without one)."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):  # (a test's captured stream)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def _remove_if_only_records(run_dir: str | Path | None) -> None:
    if not run_dir:
        return
    run_dir = Path(run_dir)
    if run_dir.is_dir() and all(p.name in (".hydra", "train.log", "evaluate.log") for p in run_dir.iterdir()):
        shutil.rmtree(run_dir, ignore_errors=True)


def check_writable(path: Path, option: str, directory: bool = False) -> None:
    """A ``UsageError`` naming ``option`` unless ``path`` (a file, or with ``directory`` a folder)
    can be written: checked before any work, so that hours of scoring are not lost to a typo.
    Nothing is created: the nearest folder that exists is tried with a temporary file.

    >>> import tempfile; folder = Path(tempfile.mkdtemp())
    >>> (folder / "old.jsonl").write_text("{}"); check_writable(folder / "old.jsonl", "--out")
    2
    >>> check_writable(folder / "new" / "scored.jsonl", "--out")
    >>> check_writable(folder, "--out")
    Traceback (most recent call last):
    model.errors.UsageError: --out ...: a folder, not a file
    """
    import tempfile

    if path.exists() and path.is_dir() != directory:
        raise UsageError(f"{option} {path}: " + ("not a folder" if directory else "a folder, not a file"))
    where = (path if directory else path.parent).absolute()
    while not where.exists() and where != where.parent:
        where = where.parent
    if not where.is_dir():
        raise UsageError(f"{option} {path}: cannot be written ({where} is not a folder)")
    try:
        with tempfile.TemporaryFile(dir=where):
            pass
    except OSError as e:
        raise UsageError(f"{option} {path}: cannot be written ({e.strerror or type(e).__name__})") from None


def check_seconds(value, name: str = "timeout_s") -> None:
    """A ``ValueError`` naming ``name`` unless ``value`` is None or a positive number of seconds.

    >>> check_seconds(2.5)
    >>> check_seconds(0, "guard: timeout_s")
    Traceback (most recent call last):
    ValueError: guard: timeout_s: expected a positive number of seconds, found 0
    """
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0):
        raise ValueError(f"{name}: expected a positive number of seconds, found {value!r}"[:200])
