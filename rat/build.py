"""Which sqlglot build `rat` runs on: the mypyc-compiled one (the `sqlglotc` distribution, which
overlays compiled modules onto sqlglot's package) or pure Python, and a way to force pure Python
in a process that has both (``RAT_SQLGLOT=pure``), to compare the two builds side by side.

Set ``RAT_SQLGLOT=pure`` before anything imports sqlglot: importing `rat` then loads every
``sqlglot.*`` module from its ``.py`` source, skipping the compiled ``.so`` beside it.

>>> sqlglot_build() in ("compiled (sqlglotc)", "pure Python")
True
>>> version_line().startswith("rat: sqlglot ")
True
"""

import importlib.machinery
import os
import sys

_SOURCE_ONLY = [(importlib.machinery.SourceFileLoader, importlib.machinery.SOURCE_SUFFIXES),
                (importlib.machinery.SourcelessFileLoader,
                 importlib.machinery.BYTECODE_SUFFIXES)]


class _PureSqlglotFinder:
    """Import hook: ``sqlglot`` and its submodules from ``.py`` files only."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name != "sqlglot" and not name.startswith("sqlglot."):
            return None
        for entry in sys.path if path is None else path:
            finder = importlib.machinery.FileFinder(entry or ".", *_SOURCE_ONLY)
            spec = finder.find_spec(name, target)
            if spec is not None:
                return spec
        return None


def use_pure_sqlglot() -> None:
    """Make later imports of sqlglot pure Python, even where sqlglotc is installed; an
    ImportError when a compiled sqlglot is imported already (too late to switch)."""
    if not any(isinstance(f, _PureSqlglotFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _PureSqlglotFinder())
    loaded = [m for name, m in list(sys.modules.items())
              if name.startswith("sqlglot.") and not _is_source(m)]
    if loaded:
        raise ImportError(f"RAT_SQLGLOT=pure, but compiled sqlglot modules are imported already "
                          f"({loaded[0].__name__}): set it before anything imports sqlglot")


def _is_source(module) -> bool:
    return (getattr(module, "__file__", None) or ".py").endswith((".py", ".pyc"))


def sqlglot_build() -> str:
    """'compiled (sqlglotc)' or 'pure Python': how sqlglot's tokenizer and parser run here."""
    from sqlglot import parser, tokenizer_core

    compiled = not (_is_source(tokenizer_core) and _is_source(parser))
    return "compiled (sqlglotc)" if compiled else "pure Python"


def version_line() -> str:
    """One line for ``python -m rat --version``."""
    import sqlglot

    return f"rat: sqlglot {sqlglot.__version__}, {sqlglot_build()}"


_REQUESTED = os.environ.get("RAT_SQLGLOT", "").strip().lower()
if _REQUESTED == "pure":
    use_pure_sqlglot()
elif _REQUESTED not in ("", "compiled", "default"):
    raise ImportError(f"RAT_SQLGLOT={_REQUESTED!r}: expected 'pure' or 'compiled' (or unset)")
