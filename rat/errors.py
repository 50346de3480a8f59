"""The one exception type of `rat`: bad or unsupported SQL, with the SQL quoted."""


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
