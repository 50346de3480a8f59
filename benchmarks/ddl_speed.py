"""Reading a schema from DDL given as ``--schema``: a whole dump's rows are skipped as its lines
are read, the DDL left is parsed by sqlglot. Prints, for dumps of one table written as each tool
writes its rows, the seconds and MB/s to the schema, beside schema-only DDL of many tables in the
same run (what a parse costs per MB).

    python benchmarks/ddl_speed.py --mb 10

The dumps are written here (``--mb`` MB of rows each): mysqldump's extended INSERT lines
(backslash escapes), pg_dump's ``COPY .. FROM stdin``, ``--inserts`` (a row per INSERT, values
with ``;`` and line breaks) and ``--rows-per-insert=1000`` (a row per line); the formats are those
the real tools write (``tests/test_databases.py`` reads dumps of each tool).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from model.cli_types import positive_float
from model.data.databases import read_ddl_lines, schema_from_ddl

TABLE = {"mysql": "CREATE TABLE `notes` (`id` int NOT NULL, `body` text, PRIMARY KEY (`id`));\n",
         "postgres": "CREATE TABLE public.notes (id integer NOT NULL, body text);\n"
                     "ALTER TABLE ONLY public.notes ADD CONSTRAINT notes_pkey PRIMARY KEY (id);\n"}


def rows(shape: str, size: int) -> str:
    """About ``size`` characters of one table's rows as ``shape``'s tool writes them."""
    body = "line {k}; it''s\nsecond line " + "z" * 40
    out, k, total = [], 0, 0
    while total < size:
        if shape == "mysqldump":
            line = "INSERT INTO `notes` VALUES " + ",".join(
                f"({k + i},'line {k + i}; it\\'s\\nsecond line {'z' * 40}')" for i in range(1000)) + ";\n"
            k += 1000
        elif shape == "copy":
            line = "".join(f"{k + i}\tline {k + i}; it's\\nsecond line {'z' * 40}\n" for i in range(1000))
            k += 1000
        elif shape == "inserts":
            line = "".join(f"INSERT INTO public.notes VALUES ({k + i}, '{body.format(k=k + i)}');\n" for i in range(1000))
            k += 1000
        else:  # rows-per-insert
            line = "INSERT INTO public.notes VALUES\n" + ",\n".join(
                f"\t({k + i}, '{body.format(k=k + i)}')" for i in range(1000)) + ";\n"
            k += 1000
        out.append(line)
        total += len(line)
    text = "".join(out)
    if shape == "copy":
        text = "COPY public.notes (id, body) FROM stdin;\n" + text + "\\.\n"
    return text


def schema_only(tables: int) -> str:
    return "".join(f"CREATE TABLE public.t{k} (id integer NOT NULL, name text, amount numeric(10, 2), "
                   f"created timestamp with time zone, other_id integer REFERENCES public.t{max(k - 1, 0)}(id), "
                   f"PRIMARY KEY (id));\n" for k in range(tables))


def read(path: Path, dialect: str) -> tuple[float, int]:
    start = time.perf_counter()
    with path.open() as file:
        schema = schema_from_ddl(read_ddl_lines(file), dialect)
    return time.perf_counter() - start, len(schema.tables)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=positive_float, default=10.0, help="MB of rows in each dump")
    args = parser.parse_args()
    size = int(args.mb * 1e6)
    cases = [("mysqldump (extended INSERT lines)", "mysql", TABLE["mysql"] + rows("mysqldump", size)),
             ("pg_dump (COPY)", "postgres", TABLE["postgres"] + rows("copy", size)),
             ("pg_dump --inserts", "postgres", TABLE["postgres"] + rows("inserts", size)),
             ("pg_dump --rows-per-insert=1000", "postgres", TABLE["postgres"] + rows("rows-per-insert", size)),
             ("schema only: 2,000 CREATE TABLEs", "postgres", schema_only(2_000))]
    print("| file | MB | tables | seconds | MB/s |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, dialect, text in cases:
            path = Path(tmp) / "dump.sql"
            path.write_text(text)
            seconds, tables = read(path, dialect)
            mb = path.stat().st_size / 1e6
            print(f"| {name} | {mb:.1f} | {tables:,} | {seconds:.2f} | {mb / seconds:.1f} |", flush=True)


if __name__ == "__main__":
    main()
