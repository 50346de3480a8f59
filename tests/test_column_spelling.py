"""SQLite-written SQL run on PostgreSQL / MySQL: SQLite reads names in any case, and the SQL is
written for the database in lower case, so a column (not only a table) the database spells in
another case, and a table of another schema, are spelt as the database spells them."""

from __future__ import annotations

import pytest

from model.data import execution
from model.data.databases import open_database
from model.data.transpile import Spelling

SPELLING = Spelling({"customers": ("Customers", {"id": "id", "full name": "Full Name"}),
                     "orders": ("orders", {"id": "id", "total": "total"}),
                     "sales.orders": ("sales.Orders", {"id": "id", "total": "Total"}),
                     "invoices": ("Invoices", {"amount": "Amount"})},
                    {"sales.orders": ("sales", "Orders")}, {"invoices": "archive"})


@pytest.mark.parametrize(("sql", "written"), [
    ('SELECT "Full Name" FROM Customers', 'SELECT "Full Name" FROM "Customers"'),
    ("SELECT T1.full_name, T1.ID FROM customers AS T1", 'SELECT t1.full_name, t1.id FROM "Customers" AS t1'),
    ('SELECT sum(T2.total) FROM sales.Orders AS T2', 'SELECT SUM(t2."Total") FROM "sales"."Orders" AS t2'),
    ("SELECT sales.orders.total FROM sales.orders", 'SELECT "sales"."Orders"."Total" FROM "sales"."Orders"'),
    ("SELECT total FROM orders", "SELECT total FROM orders"),
    ("SELECT amount FROM invoices", 'SELECT "Amount" FROM "archive"."Invoices"'),
    ('SELECT sub."full name" FROM (SELECT "Full Name" FROM customers) AS sub',
     'SELECT sub."Full Name" FROM (SELECT "Full Name" FROM "Customers") AS sub'),
    # an output column's name is not a table's column
    ('SELECT id AS "full name" FROM customers ORDER BY "full name"',
     'SELECT id AS "full name" FROM "Customers" ORDER BY "full name" NULLS FIRST'),
])
def test_columns_and_schemas_are_spelt_as_the_database_spells_them(sql, written) -> None:
    assert execution.runnable_sql(sql, "sqlite", "postgres", None, SPELLING) == written


def test_sqlite_sql_reads_columns_and_other_schemas_tables_postgres_spells_otherwise(postgres_server):
    """It was `UndefinedColumn: column "full name" does not exist` (only tables were spelt), and
    `sales."orders"` for the table `sales."Orders"`."""
    import psycopg

    url = postgres_server.create_database("colspelling")
    with psycopg.connect(postgres_server.url("colspelling", admin=True), autocommit=True) as conn:
        for statement in ['CREATE TABLE IF NOT EXISTS "Customers" (id int PRIMARY KEY, "Full Name" text)',
                          "CREATE TABLE IF NOT EXISTS orders (id int, total int)",
                          "CREATE SCHEMA IF NOT EXISTS sales", "CREATE SCHEMA IF NOT EXISTS archive",
                          'CREATE TABLE IF NOT EXISTS sales."Orders" (id int, "Total" int)',
                          'CREATE TABLE IF NOT EXISTS archive."Invoices" ("Amount" int)',
                          'TRUNCATE "Customers", orders, sales."Orders", archive."Invoices"',
                          """INSERT INTO "Customers" VALUES (1, 'Ann Lee'), (2, 'Bo Li')""",
                          "INSERT INTO orders VALUES (1, 5)", 'INSERT INTO sales."Orders" VALUES (1, 40), (2, 2)',
                          'INSERT INTO archive."Invoices" VALUES (9)',
                          "GRANT USAGE ON SCHEMA sales, archive TO rat_scorer",
                          "GRANT SELECT ON ALL TABLES IN SCHEMA public, sales, archive TO rat_scorer"]:
            conn.execute(statement)
    with open_database(url) as db:
        schema = db.schema()
        for sql, rows in [('SELECT "Full Name" FROM Customers ORDER BY id', [("Ann Lee",), ("Bo Li",)]),
                          (('SELECT T1."FULL NAME" FROM customers AS T1 JOIN sales.orders AS T2 ON T1.id = T2.id '
                            "WHERE T2.total > 10"), [("Ann Lee",)]),
                          ("SELECT sum(total) FROM sales.Orders", [(42,)]),
                          ("SELECT sum(total) FROM orders", [(5,)]),
                          ("SELECT amount FROM invoices", [(9,)])]:
            assert db.run(sql, "sqlite", schema) == (rows, None), sql


def test_sqlite_sql_reads_a_table_mysql_spells_otherwise(mysql_server):
    """MySQL tells the case of table names apart on Linux and ignores its columns': the table
    as the database spells it, the column however written (this passed before too: a check that
    spelling columns changes nothing on MySQL)."""
    import pymysql

    url = mysql_server.create_database("colspelling")
    conn = pymysql.connect(host=mysql_server.host, port=mysql_server.port, user="rat_admin",
                           password="admin-pw", database="colspelling", autocommit=True)
    with conn.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS `Customers`")
        cursor.execute("CREATE TABLE `Customers` (id int PRIMARY KEY, `Full Name` text)")
        cursor.execute("INSERT INTO `Customers` VALUES (1, 'Ann Lee')")
    conn.close()
    with open_database(url) as db:
        assert db.run('SELECT "Full Name" FROM customers', "sqlite", db.schema()) == ([("Ann Lee",)], None)

