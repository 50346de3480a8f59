"""The exception types of `rat` (bad or unsupported SQL, with the SQL quoted, SQL that does not
parse told apart; a bug of our own,
which is never reported as bad SQL), and the one place where running out of recursion depth is
turned into a retry or an error."""

import sys
import threading

QUOTED = 200  # characters of the SQL an error message quotes


class RATError(ValueError):
    """Raised when SQL cannot be parsed or uses a construct `rat` does not model.

    The message quotes the offending SQL and names the construct.

    >>> str(RATError("unsupported construct 'PIVOT'", "SELECT 1"))
    "unsupported construct 'PIVOT' in SQL: 'SELECT 1'"
    >>> len(str(RATError("cannot parse", "x" * 10_000)))  # long SQL is cut in the message
    226
    """

    def __init__(self, problem: str, sql: str | None = None):
        self.problem = problem
        self.sql = sql  # whole
        shown = None if sql is None else repr(sql[:QUOTED]) + ("..." if len(sql) > QUOTED else "")
        super().__init__(problem if sql is None else f"{problem} in SQL: {shown}")

    def __reduce__(self):
        return _restored, (type(self), self.args, self.__dict__)


def _restored(kind: type, args: tuple, state: dict) -> BaseException:
    """An exception of `rat` as pickled: its message (`args`) and attributes as they were, its
    `__init__` not run again (which reads other arguments than the message).

    >>> import pickle
    >>> str(pickle.loads(pickle.dumps(DepthError("SELECT 1"))))
    "query nested too deeply in SQL: 'SELECT 1'"
    """
    error = kind.__new__(kind, *args)
    error.args = args
    error.__dict__.update(state)
    return error


class ParseError(RATError):
    """Raised when SQL cannot be parsed: it is not SQL of its dialect, or is cut short or
    malformed (`SELEC x`, `SELECT a FROM t,`). Its message begins with ``cannot parse``; a
    construct `rat` does not model, or a query nested too deeply, is a plain `RATError`
    (`DepthError`), never a ParseError.

    >>> error = ParseError("cannot parse (FROM before SELECT at line 1, col 4)", "FROM t SELECT a")
    >>> isinstance(error, RATError), str(error)
    (True, "cannot parse (FROM before SELECT at line 1, col 4) in SQL: 'FROM t SELECT a'")
    """


class DepthError(RATError):
    """The query is nested more deeply than parsing or building its tree can follow."""

    def __init__(self, sql: str | None = None):
        super().__init__("query nested too deeply", sql)


class InternalError(RuntimeError):
    """A bug in `rat` (or in sqlglot), not a problem of the SQL: anything but a RATError that
    canonicalising, building or generating raises. Never a RATError, so that no caller counts
    it as bad SQL; the tests assert it never occurs on real data.

    >>> str(InternalError("build tree", KeyError("x"), "SELECT 1"))
    "bug in rat: build tree raised KeyError: 'x' in SQL: 'SELECT 1'"
    """

    def __init__(self, stage: str, error: BaseException, sql: str):
        self.stage = stage
        self.sql = sql
        shown = repr(sql[:QUOTED]) + ("..." if len(sql) > QUOTED else "")
        detail = " ".join(str(error).split())[:QUOTED]
        super().__init__(f"bug in rat: {stage} raised {type(error).__name__}: {detail} in SQL: {shown}")

    def __reduce__(self):
        return _restored, (type(self), self.args, self.__dict__)


class internal_errors:  # lowercase: used as a context manager, like contextlib's
    """Let RATError through; running out of recursion depth is a `DepthError`; anything else
    raised inside the block is a bug, re-raised as `InternalError` naming `stage` (with the
    original exception as its cause). A class, not a @contextmanager: it runs per query.

    >>> with internal_errors("SELECT 1", "build tree"):
    ...     {}["missing"]
    Traceback (most recent call last):
    rat.errors.InternalError: bug in rat: build tree raised KeyError: 'missing' in SQL: 'SELECT 1'
    """

    __slots__ = ("sql", "stage")

    def __init__(self, sql: str, stage: str):
        self.sql = sql
        self.stage = stage

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, error, traceback) -> bool:
        if error is None or isinstance(error, RATError) or not isinstance(error, Exception):
            return False
        if isinstance(error, RecursionError):
            raise DepthError(self.sql) from None
        raise InternalError(self.stage, error, self.sql) from error


# sqlglot parses and `rat` builds trees recursively: about 20 Python frames per level of
# parentheses, 2 per term of a long `a + b + ...` chain. Queries that exhaust the default limit
# (1000 frames) are retried on a thread of their own, with room for 20x as many frames.
DEEP_RECURSION_LIMIT = 20_000
_DEEP_STACK_BYTES = 512 << 20  # reserved address space; only the pages used are committed
_deep_lock = threading.Lock()
_on_deep_thread = threading.local()


def deeply(function, *args):
    """``function(*args)``, a function of a user's SQL that recurses once a level of its nesting
    (sqlglot's parser and generator: about 20 frames a level of parentheses), run again on the
    deep stack of `with_deep_stack` where the default one runs out; `DepthError` where that one
    does too.

    >>> import sqlglot
    >>> deeply(lambda sql: sqlglot.parse_one(sql).sql(), "SELECT " + "(" * 300 + "1" + ")" * 300)[:12]
    'SELECT ((((('
    """
    def run(*arguments):
        try:
            return function(*arguments)
        except RecursionError:
            raise DepthError() from None

    return with_deep_stack(run, *args)


def with_deep_stack(function, *args):
    """``function(*args)``; when it raises `DepthError`, run it once more on a thread with a
    large stack and a recursion limit of `DEEP_RECURSION_LIMIT`, and return or raise what
    that run does.

    >>> def nest(n):
    ...     try:
    ...         return 0 if n == 0 else 1 + nest(n - 1)
    ...     except RecursionError:
    ...         raise DepthError("SELECT ...") from None
    >>> with_deep_stack(nest, 5000)
    5000
    >>> with_deep_stack(nest, 10**6)
    Traceback (most recent call last):
    rat.errors.DepthError: query nested too deeply in SQL: 'SELECT ...'
    """
    try:
        return function(*args)
    except DepthError:
        if getattr(_on_deep_thread, "active", False):
            raise
    outcome: dict[str, object] = {}

    def run() -> None:
        _on_deep_thread.active = True
        try:
            outcome["value"] = function(*args)
        except BaseException as error:  # noqa: BLE001 - re-raised on the caller's thread
            outcome["error"] = error

    # The recursion limit is per interpreter: raise it only while the deep thread runs, one
    # deep thread at a time.
    with _deep_lock:
        old_limit = sys.getrecursionlimit()
        old_stack = threading.stack_size()
        thread = threading.Thread(target=run, name="rat-deep-stack", daemon=True)
        sys.setrecursionlimit(max(old_limit, DEEP_RECURSION_LIMIT))
        try:
            threading.stack_size(_DEEP_STACK_BYTES)
            try:
                thread.start()
            finally:
                threading.stack_size(old_stack)
            thread.join()
        finally:
            sys.setrecursionlimit(old_limit)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
