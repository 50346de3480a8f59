"""DDL read as the schema (model.data.databases.schema_from_ddl) as warehouses' and tools' scripts
write it: tables sqlglot reads only in part, storage and security clauses, Snowflake's schemas,
names rat cannot tell apart, partition columns, SQL Server's inline indexes and keys, SQLite's
own grammar (every Spider database's DDL), line numbers and hints in refusals, UTF-16 files."""

import logging
import sqlite3
from pathlib import Path

import pytest

from model.data.databases import open_database, schema_from_ddl
from model.errors import UsageError
from model.scoring.inputs import read_schemas

SPIDER = Path(__file__).resolve().parents[2] / "shared" / "data" / "spider" / "database"


@pytest.mark.parametrize("dialect, ddl, tables", [
    ("tsql", ("CREATE TABLE [dbo].[P]([k] [int] NOT NULL PRIMARY KEY) ON [PRIMARY]\nGO\n"
             "CREATE TABLE [dbo].[T]([id] [int] NULL, [pk] [int] REFERENCES [dbo].[P]([k]), [n] [nvarchar](max) NULL) "
             "ON [PRIMARY] TEXTIMAGE_ON [PRIMARY]\nGO\n"), {"p": ("k",), "t": ("id", "pk", "n")}),
    ("redshift", ("CREATE TABLE p (k INT PRIMARY KEY);\nCREATE TABLE t (id INT, pk INT REFERENCES p(k), d DATE) "
                 "INTERLEAVED SORTKEY (id, d);\nCREATE TABLE u (id INT) ENCODE AUTO;"),
     {"p": ("k",), "t": ("id", "pk", "d"), "u": ("id",)}),
    ("snowflake", ("create or replace TABLE P (K NUMBER PRIMARY KEY);\n"
                  "create or replace HYBRID TABLE T (ID NUMBER PRIMARY KEY, PK NUMBER REFERENCES P(K), X NUMBER, "
                  "index IX_X (X));\ncreate or replace dynamic table T7(ID, X) target_lag='1 minute' warehouse=W "
                  "as select ID, X from T;"), {"p": ("k",), "t": ("id", "pk", "x"), "t7": ("id", "x")}),
    ("athena", ("CREATE TABLE p (k int, PRIMARY KEY (k));\nCREATE EXTERNAL TABLE `t`(`id` int, `pk` int) PARTITIONED BY "
               "(`ds` string) ROW FORMAT SERDE 'org.x.Serde' LOCATION 's3://b/t/' TBLPROPERTIES ('k'='v');"),
     {"p": ("k",), "t": ("id", "pk", "ds")}),
])
def test_tables_sqlglot_reads_only_in_part_are_read_with_their_keys(dialect, ddl, tables):
    """A CREATE TABLE sqlglot keeps as a command (trailing storage options, HYBRID TABLE with an
    index) is read without what it cannot read, its foreign keys too; a dynamic table's named
    columns and an external table's partition columns are its columns."""
    schema = schema_from_ddl(ddl, dialect)
    assert schema.tables == tables
    if dialect != "athena":
        assert [fk[0].split(".")[-1].lower() for fk in schema.foreign_keys] == ["pk"]


def test_a_table_that_cannot_be_read_is_named(caplog):
    """A CREATE TABLE sqlglot keeps as a command and rat cannot read otherwise, or one without
    columns of its own (LIKE), is one warning naming it and its line, not dropped without a word."""
    with caplog.at_level(logging.WARNING):
        schema = schema_from_ddl("CREATE TABLE a (id INT);\n\nCREATE TABLE b LIKE a;\nCREATE TABLE c OF my_type;", "postgres")
    assert schema.tables == {"a": ("id",)}
    assert sorted(r.getMessage() for r in caplog.records) == [
        "DDL: line 3: table b is not read (no columns declared)",
        "DDL: line 4: table c is not read (sqlglot cannot read it as postgres DDL)"]


def test_go_with_a_count_or_a_comment_ends_the_batch():
    """SQL Server's `GO 2` and `go -- end` separate statements as a plain `GO` does."""
    schema = schema_from_ddl("CREATE TABLE a (id INT)\nGO 2\nCREATE TABLE b (id INT)\ngo -- end\n"
                             "CREATE TABLE c (id INT)\n", "tsql")
    assert set(schema.tables) == {"a", "b", "c"}


def test_tables_after_snowflakes_create_schema_are_in_that_schema():
    """Snowflake's GET_DDL('DATABASE') writes names without their schema after each
    `create or replace schema X`: those tables are X's, as a session's current schema."""
    schema = schema_from_ddl("create or replace database A;\ncreate or replace schema RAW;\n"
                             "create or replace TABLE ORDERS (ID NUMBER, PAYLOAD VARIANT);\n"
                             "create or replace schema MART;\ncreate or replace TABLE ORDERS (ORDER_ID NUMBER);\n"
                             "use schema RAW;\ncreate or replace TABLE EVENTS (ID NUMBER);", "snowflake")
    assert schema.tables == {"orders": ("order_id",), "raw.orders": ("id", "payload"), "events": ("id",)}
    assert schema.table_schemas == {"orders": "mart", "events": "raw"}


def test_or_replace_keeps_the_later_table():
    """`create or replace TABLE T` declared again replaces the first, keys too."""
    schema = schema_from_ddl("create or replace TABLE T (A NUMBER PRIMARY KEY);\n"
                             "create or replace TABLE T (A NUMBER, B NUMBER, PRIMARY KEY (B));", "snowflake")
    assert schema.tables == {"t": ("a", "b")} and schema.primary_keys == ("t.b",)


@pytest.mark.parametrize("dialect, ddl, names", [
    ("snowflake", 'create or replace TABLE "Orders" ("Id" NUMBER);\ncreate or replace TABLE ORDERS (ID NUMBER);',
     ('"Orders"', "ORDERS")),
    ("trino", "CREATE TABLE hive.s.t (a INT);\nCREATE TABLE iceberg.s.t (b INT);", ("hive.s.t", "iceberg.s.t")),
])
def test_two_tables_rat_cannot_tell_apart_are_refused_naming_both(dialect, ddl, names):
    """Two tables whose names differ only in case or in catalog: one line naming both, not the
    second dropped."""
    with pytest.raises(UsageError, match=rf"{names[0]}.*line 1.*{names[1]}.*line 2"):
        schema_from_ddl(ddl, dialect)


@pytest.mark.parametrize("dialect", ["databricks", "hive", "redshift"])
def test_partition_columns_are_columns_of_the_table(dialect):
    """Hive-style `PARTITIONED BY (ds STRING)` declares columns of the table, after the others."""
    ddl = "CREATE TABLE logs (id INT, v VARCHAR(10)) PARTITIONED BY (ds VARCHAR(10)) STORED AS PARQUET;"
    if dialect == "redshift":  # Spectrum's external tables
        ddl = "CREATE EXTERNAL TABLE spectrum.logs (id INT, v VARCHAR(10)) PARTITIONED BY (ds VARCHAR(10)) " \
              "STORED AS PARQUET LOCATION 's3://b/logs/';"
    assert list(schema_from_ddl(ddl, dialect).tables.values()) == [("id", "v", "ds")]


def test_sql_servers_inline_index_is_no_column_and_its_column_foreign_key_is_kept():
    """`INDEX ix NONCLUSTERED (x)` in a CREATE TABLE is an index, not a column named index;
    `pid INT NULL FOREIGN KEY REFERENCES p(k)` is a foreign key."""
    schema = schema_from_ddl("CREATE TABLE p (k INT PRIMARY KEY);\nCREATE TABLE t (id INT, x INT, "
                             "pid INT NULL FOREIGN KEY REFERENCES p(k), INDEX ix_x NONCLUSTERED (x));", "tsql")
    assert schema.tables["t"] == ("id", "x", "pid")
    assert schema.foreign_keys == (("t.pid", "p.k"),)


@pytest.mark.parametrize("dialect, ddl", [
    ("tsql", ("CREATE TABLE t (id UNIQUEIDENTIFIER ROWGUIDCOL NOT NULL, a VARBINARY(MAX) FILESTREAM NULL, "
             "pk INT SPARSE NULL REFERENCES p (k))")),
    ("tsql", "CREATE TABLE t (id INT, a INT, pk INT REFERENCES p (k)) WITH (LEDGER = ON)"),
    ("tsql", "CREATE TABLE t (id INT, a INT, pk INT REFERENCES p (k), INDEX [CCI] CLUSTERED COLUMNSTORE)"),
    ("tsql", "CREATE TABLE t (id INT, a VARCHAR(100) MASKED WITH (FUNCTION = 'email()') NULL, pk INT REFERENCES p (k))"),
    ("tsql", ("CREATE TABLE t (id INT, a VARCHAR(100) COLLATE Latin1_General_BIN2 ENCRYPTED WITH "
             "(COLUMN_ENCRYPTION_KEY = k, ENCRYPTION_TYPE = Deterministic, ALGORITHM = 'AEAD_AES_256_CBC_HMAC_SHA_256') "
             "NULL, pk INT REFERENCES p (k))")),
    ("tsql", "CREATE TABLE t ([id] [int] NOT NULL CONSTRAINT [PK_t] PRIMARY KEY CLUSTERED, a INT, pk INT REFERENCES p (k))"),
    ("redshift", "CREATE TABLE t (id INT DISTKEY, a DATE SORTKEY, pk INT REFERENCES p (k))"),
    ("redshift", "CREATE TABLE t (id INT, a DATE, pk INT REFERENCES p (k)) SORTKEY AUTO"),
    ("databricks", "CREATE TABLE t (id INT, a STRING MASK mask_a, pk INT REFERENCES p (k)) WITH ROW FILTER f ON (a)"),
])
def test_storage_and_security_clauses_are_read_past(dialect, ddl):
    """Column attributes of storage or security (SQL Server's ROWGUIDCOL, SPARSE, FILESTREAM,
    MASKED, ENCRYPTED, inline columnstore index, column PRIMARY KEY CLUSTERED; Redshift's column
    DISTKEY / SORTKEY, SORTKEY AUTO; Databricks' MASK, ROW FILTER) do not keep a table unread."""
    schema = schema_from_ddl(f"CREATE TABLE p (k INT PRIMARY KEY);\n{ddl};", dialect)
    assert schema.tables["t"] == ("id", "a", "pk")
    assert schema.foreign_keys == (("t.pk", "p.k"),)


def test_a_refusal_names_the_table_and_its_line_in_the_file():
    """A table that cannot be read is named, with its line in the file (blank lines counted)."""
    ddl = "CREATE TABLE a (id INT);\n\n\n\nCREATE TABLE b (id INT, x INT WEIRD CLAUSE 3);\n"
    with pytest.raises(UsageError, match=r"^DDL: line 5: cannot read table b as sqlite DDL \(Expecting \)"):
        schema_from_ddl(ddl)


@pytest.mark.parametrize("dialect", ["sqlite", "postgres", "mysql"])
def test_a_statement_that_cannot_be_read_is_refused_and_only_mysqls_do_is_skipped(dialect):
    """A misspelt statement (``CRATE TABLE``) was dropped without a word in every dialect, with
    the table it meant: it is refused, naming it and its line; MySQL's ``DO`` (mysqldump's
    ``DO SETVAL(..)`` after a MariaDB sequence), which declares nothing, alone is skipped."""
    with pytest.raises(UsageError, match=rf"^DDL: line 2: cannot read the statement CRATE TABLE b \.\. as {dialect} DDL"):
        schema_from_ddl("CREATE TABLE a (x int);\nCRATE TABLE b (y int);\nCREATE TABLE c (z int);\n", dialect)
    if dialect == "mysql":
        assert schema_from_ddl("CREATE TABLE a (x int);\nDO SETVAL(`ids`, 5, 0);\n", dialect).tables == {"a": ("x",)}


def test_ddl_that_reads_in_another_dialect_suggests_it():
    """SQLite DDL (the default) that does not read but reads in another dialect: --dialect."""
    with pytest.raises(UsageError, match=r"line 2: cannot read table t as sqlite DDL .*: --dialect bigquery$"):
        schema_from_ddl("CREATE TABLE u (id INT64);\nCREATE TABLE t (id INT64, d DATE OPTIONS(description='day'))")


@pytest.mark.parametrize("ddl, tables, keys", [
    ("CREATE TABLE u (b int PRIMARY KEY); CREATE TABLE t (a int, b int, PRIMARY KEY (a) FOREIGN KEY (b) REFERENCES u(b))",
     {"u": ("b",), "t": ("a", "b")}, (("u.b", "t.a"), (("t.b", "u.b"),))),
    ("CREATE TABLE t (a int, UNIQUE (a) CHECK (a > 0))", {"t": ("a",)}, ((), ())),
    (("CREATE TABLE p (id int PRIMARY KEY); CREATE TABLE a (id INTEGER, pid int, PRIMARY KEY (id) FOREIGN KEY (pid) "
      "REFERENCES p (id) ON DELETE CASCADE FOREIGN KEY (id) REFERENCES p(id))"),
     {"p": ("id",), "a": ("id", "pid")}, (("p.id", "a.id"), (("a.pid", "p.id"), ("a.id", "p.id")))),
    ("CREATE TABLE t (a int, b int, CONSTRAINT k UNIQUE (a) CONSTRAINT pk PRIMARY KEY (b))",
     {"t": ("a", "b")}, (("t.b",), ())),
    (("CREATE TABLE t (iata character varchar(3) PRIMARY KEY, b unsigned big int, c varying character(10), "
     "d native character(5), e long text)"), {"t": ("iata", "b", "c", "d", "e")}, (("t.iata",), ())),
])
def test_sqlite_ddl_that_sqlite_accepts_is_read(ddl, tables, keys):
    """SQLite's grammar: table constraints without commas between them, type names of several words."""
    schema = schema_from_ddl(ddl)
    assert schema.tables == tables and (schema.primary_keys, schema.foreign_keys) == keys


@pytest.mark.skipif(not SPIDER.is_dir(), reason="Spider's databases are not here")
def test_every_spider_databases_ddl_is_its_schema():
    """The DDL in each Spider database's sqlite_master is read as rat reads the database:
    the same tables, columns in order, primary and foreign keys."""
    differ = []
    for path in sorted(SPIDER.glob("*/*.sqlite")):
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
            ddl = ";\n".join(sql for name, sql in conn.execute("SELECT name, sql FROM sqlite_master WHERE sql IS NOT "
                                                               "NULL AND name != 'sqlite_sequence'")) + ";"
        conn.close()
        with open_database(path) as db:
            expected = db.schema(path.stem)
        got = schema_from_ddl(ddl, "sqlite", path.stem)
        expected_tables = {t: c for t, c in expected.tables.items() if t != "sqlite_sequence"}
        if (got.tables, set(got.primary_keys), set(got.foreign_keys)) != \
                (expected_tables, set(expected.primary_keys), set(expected.foreign_keys)):
            differ.append(path.stem)
    assert not differ


def test_a_utf16_schema_file_is_read(tmp_path):
    """SSMS's "Unicode text" (UTF-16 with its BOM) and UTF-8 with a BOM are read as text."""
    ddl = "CREATE TABLE [dbo].[t] ([id] [int] NOT NULL PRIMARY KEY)\r\nGO\r\n"
    for encoding in ("utf-16", "utf-8-sig"):
        path = tmp_path / f"{encoding}.sql"
        path.write_bytes(ddl.encode(encoding))
        assert read_schemas(path, dialect="tsql")[path.stem].tables == {"t": ("id",)}


def test_alter_table_add_column_adds_the_column():
    """`ALTER TABLE .. ADD [COLUMN] c type` adds the column, with its keys."""
    schema = schema_from_ddl("CREATE TABLE p (k INT PRIMARY KEY);\nCREATE TABLE t (id INT);\n"
                             "ALTER TABLE t ADD COLUMN pk INT REFERENCES p (k);\nALTER TABLE t ADD c VARCHAR(3);",
                             "postgres")
    assert schema.tables["t"] == ("id", "pk", "c") and schema.foreign_keys == (("t.pk", "p.k"),)


SSMS_SCRIPT = """USE [Shop]
GO
CREATE TABLE [dbo].[Customers]([Id] [int] NOT NULL PRIMARY KEY) ON [PRIMARY]
GO
CREATE PROCEDURE [dbo].[usp_Load]
AS
BEGIN
	SET NOCOUNT ON;
	CREATE TABLE #stage (Id int, Junk nvarchar(10));
	INSERT INTO #stage VALUES (1, 'a');
	CREATE TABLE [dbo].[NotReal] (X int);
END
GO
create or alter trigger dbo.trg on dbo.Customers after insert as
begin; create table dbo.AlsoNotReal (y int); end
GO
CREATE FUNCTION dbo.fn (@x int) RETURNS TABLE AS RETURN (SELECT @x AS y)
GO
CREATE TABLE #tmp (id int)
GO
CREATE TABLE ##g (id int) ON [PRIMARY]
GO
CREATE TABLE [dbo].[Orders]([Id] [int] NOT NULL, [CustomerId] [int] REFERENCES [dbo].[Customers]([Id]))
GO
"""


def test_sql_servers_procedure_bodies_and_temporary_tables_are_not_tables(caplog):
    """A procedure's, function's or trigger's body (first in its GO batch, to the next GO) is
    not read, the tables it creates neither; a temporary table (#t, ##t) is a warning, not a
    table of the schema."""
    with caplog.at_level(logging.WARNING):
        schema = schema_from_ddl(SSMS_SCRIPT, "tsql")
    assert schema.tables == {"customers": ("id",), "orders": ("id", "customerid")}
    assert schema.foreign_keys == (("orders.customerid", "customers.id"),)
    assert [r.getMessage() for r in caplog.records] == [
        "DDL: line 19: table #tmp is not read (a temporary table)",
        "DDL: line 21: table ##g is not read (a temporary table)"]


def test_a_procedure_without_go_after_it_runs_to_the_end_of_the_file(caplog):
    """A procedure without a GO after it is, as SQL Server reads it, the rest of the file:
    nothing after it is read, and one warning says so."""
    with caplog.at_level(logging.WARNING):
        schema = schema_from_ddl("CREATE TABLE a (id INT);\nCREATE PROC p AS BEGIN\nCREATE TABLE b (x INT);\nEND;\n"
                                 "CREATE TABLE c (id INT);\n", "tsql")
    assert schema.tables == {"a": ("id",)}
    assert [r.getMessage() for r in caplog.records] == [
        ("DDL: line 2: no GO after this CREATE PROC: the rest of the file is its body, as SQL Server reads it "
         "(no table after it is read)")]


def test_ddl_read_in_another_dialect_names_its_tables_and_the_dialect(caplog):
    """BigQuery's DDL read as Snowflake's: each table named as written (not a lone backtick),
    with the dialect it reads in."""
    with caplog.at_level(logging.WARNING), pytest.raises(UsageError, match="no CREATE TABLE statement"):
        schema_from_ddl("CREATE TABLE `p.shop.customers`\n(\n  id INT64,\n  tags ARRAY<STRING>\n)\n"
                        "OPTIONS(description='customers');", "snowflake")
    assert [r.getMessage() for r in caplog.records] == [
        ("DDL: line 1: table `p.shop.customers` is not read (sqlglot cannot read it as snowflake DDL; "
         "it reads as bigquery DDL: --dialect bigquery)")]


def test_a_snapshot_table_is_named_as_a_table_without_columns(caplog):
    """BigQuery's CREATE SNAPSHOT TABLE .. CLONE (which sqlglot keeps as a command) is a warning,
    as CREATE TABLE .. LIKE is, not dropped without a word."""
    with caplog.at_level(logging.WARNING):
        schema = schema_from_ddl("CREATE TABLE shop.s (id INT64);\nCREATE SNAPSHOT TABLE shop.snap CLONE shop.s;\n"
                                 "CREATE TABLE shop.c CLONE shop.s FOR SYSTEM_TIME AS OF CURRENT_TIMESTAMP();",
                                 "bigquery")
    assert schema.tables == {"s": ("id",)}
    assert [r.getMessage() for r in caplog.records] == [
        "DDL: line 2: table shop.snap is not read (no columns declared)",
        "DDL: line 3: table shop.c is not read (no columns declared)"]


def test_a_table_name_of_several_schemas_off_the_default_one_is_a_warning(caplog):
    """sales.orders and finance.orders: an unqualified orders reads finance's (the first by
    name), said in one line; a name the default schema has is no warning (it is read from there)."""
    ddl = ("CREATE TABLE sales.orders (id INT, total INT);\nCREATE TABLE finance.orders (id INT, revenue INT);\n"
           "CREATE TABLE sales.customers (id INT);\nCREATE TABLE invoices (id INT);\nCREATE TABLE archive.invoices (id INT);")
    with caplog.at_level(logging.WARNING):
        schema = schema_from_ddl(ddl, "postgres")
    assert schema.tables["orders"] == ("id", "revenue") and schema.table_schemas["orders"] == "finance"
    assert [r.getMessage() for r in caplog.records] == [
        "DDL: orders is in 2 schemas (finance, sales): an unqualified orders reads finance.orders; qualify it"]
