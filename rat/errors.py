"""The one exception type of `rat`: bad or unsupported SQL, with the SQL quoted."""

from contextlib import contextmanager


class RATError(ValueError):
    """Raised when SQL cannot be parsed or uses a construct `rat` does not model.

    The message quotes the offending SQL and names the construct.

    >>> str(RATError("unsupported construct 'Pivot'", "SELECT 1"))
    "unsupported construct 'Pivot' in SQL: 'SELECT 1'"
    """

    def __init__(self, problem: str, sql: str | None = None):
        self.problem = problem
        self.sql = sql
        super().__init__(problem if sql is None else f"{problem} in SQL: {sql!r}")


@contextmanager
def only_rat_errors(sql: str, stage: str):
    """Turn any failure inside the block into a RATError naming `stage` (to_tree promises
    RATError only).

    >>> with only_rat_errors("SELECT 1", "build tree"):
    ...     {}["missing"]
    Traceback (most recent call last):
    rat.errors.RATError: cannot build tree (KeyError: 'missing') in SQL: 'SELECT 1'
    """
    try:
        yield
    except RATError:
        raise
    except RecursionError:
        raise RATError("query nested too deeply", sql) from None
    except Exception as error:  # noqa: BLE001
        raise RATError(f"cannot {stage} ({type(error).__name__}: {error})", sql) from None
