"""Real, throwaway database servers for tests: PostgreSQL and MariaDB started in a temporary
folder on a free localhost port, stopped and deleted at the end of the test session.

Fixtures (session scope, registered by ``tests/conftest.py``):

- ``postgres_server`` / ``mysql_server``: the running server (``PostgresServer`` / ``MariaDBServer``);
  ``server.create_database(name)`` makes an empty database that the scorer role may read, and
  ``server.url(name, admin=False)`` is its URL (``admin=True``: the superuser's, to load data);
- ``postgres_url`` / ``mysql_url``: the scorer role's URL of the database ``rat``;
- ``postgres_admin_url`` / ``mysql_admin_url``: the superuser's URL of the same database.

The scorer role (``rat_scorer``) is an ordinary login role: it may connect and read, never write;
the superuser (``rat_admin``) loads data. A fixture skips, with one line naming what is missing,
when the server binaries or the Python driver are not installed (``.ci/run`` installs them).

The classes work outside pytest too (``with PostgresServer() as pg: ...``), for benchmarks.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import Self

import pytest

SCORER, SCORER_PASSWORD = "rat_scorer", "scorer-pw"
ADMIN, ADMIN_PASSWORD = "rat_admin", "admin-pw"
DEFAULT_DATABASE = "rat"


class ServerUnavailable(RuntimeError):
    """The server cannot be started here (binaries or driver missing): the reason in one line."""


def free_port() -> int:
    """A TCP port free on localhost now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_service(*options: str, env: dict | None = None) -> tuple[subprocess.Popen, str]:
    """The real rat-serve (``python -m model.scoring.service *options``) on a free port, once its
    /health answers, and its URL; a start that fails is the test's failure."""
    import sys
    import urllib.request

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "model.scoring.service", "--port", str(port), *options],
                            env=env, stderr=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[1])
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            urllib.request.urlopen(url + "/health", timeout=1)
            return proc, url
        except OSError:
            if proc.poll() is not None:
                pytest.fail(proc.stderr.read())
            time.sleep(0.1)
    proc.kill()
    pytest.fail("rat-serve did not answer /health within 60 s")


def page_dom(chromium: str, url: str, query: dict, profile, fragment: str = "") -> str:
    """rat-serve's page at ``url`` with ``query`` in its link, its DOM after its scripts ran in
    headless ``chromium`` (the page scores a link's sql at once)."""
    done = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--disable-background-networking", "--disable-component-update", "--disable-sync",
                           f"--user-data-dir={profile}", "--virtual-time-budget=15000", "--dump-dom",
                           f"{url}/?{urllib.parse.urlencode(query)}{fragment}"], check=False, capture_output=True, text=True,
                          timeout=120)
    return done.stdout


def _is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def _as(user: str, command: list[str]) -> list[str]:
    """``command`` run as the OS ``user`` when we are root (PostgreSQL refuses to run as root)."""
    return ["runuser", "-u", user, "--", *command] if _is_root() else command


def _owned_tmpdir(prefix: str, user: str) -> Path:
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    if _is_root():
        shutil.chown(folder, user, user)
    return folder


# ------------------------------------------------------------------------------------ PostgreSQL


def postgres_bin() -> Path | None:
    """The folder holding initdb and pg_ctl: $RAT_PG_BIN, Debian's newest
    /usr/lib/postgresql/*/bin, or the one on PATH."""
    candidates = [os.environ.get("RAT_PG_BIN", "")]
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"),
                         key=lambda p: int(Path(p).parent.name) if Path(p).parent.name.isdigit() else 0,
                         reverse=True)
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(str(Path(on_path).parent))
    for folder in candidates:
        if folder and (Path(folder) / "initdb").exists() and (Path(folder) / "pg_ctl").exists():
            return Path(folder)
    return None


class PostgresServer:
    """A PostgreSQL cluster in a temporary folder, listening on 127.0.0.1:``port``."""

    def __init__(self) -> None:
        self.bin = postgres_bin()
        if self.bin is None:
            raise ServerUnavailable("PostgreSQL server binaries (initdb, pg_ctl) not found: "
                                    "install Debian's postgresql package or set RAT_PG_BIN")
        try:
            import psycopg  # noqa: F401
        except ImportError:
            raise ServerUnavailable("psycopg is not installed: pip install '.[postgres]'") from None
        if _is_root() and shutil.which("runuser") is None:
            raise ServerUnavailable("running as root without runuser: PostgreSQL refuses root")
        self.host, self.port = "127.0.0.1", free_port()
        self.folder: Path | None = None

    def start(self) -> PostgresServer:
        user = "postgres" if _is_root() else None
        self.folder = _owned_tmpdir("rat-pg-", user) if user else Path(tempfile.mkdtemp(prefix="rat-pg-"))
        data, pwfile = self.folder / "data", self.folder / "pwfile"
        pwfile.write_text(ADMIN_PASSWORD + "\n")
        if user:
            shutil.chown(pwfile, user, user)

        def run(command: list[str]) -> None:
            command = _as(user, command) if user else command
            done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=120)
            if done.returncode:
                raise RuntimeError(f"{' '.join(command)} failed: {done.stderr.strip() or done.stdout.strip()}")

        run([str(self.bin / "initdb"), "-D", str(data), "-U", ADMIN, f"--pwfile={pwfile}",
             "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8"])
        options = (f"-p {self.port} -k {self.folder} -c listen_addresses={self.host} "
                   "-c fsync=off -c synchronous_commit=off -c full_page_writes=off")
        run([str(self.bin / "pg_ctl"), "-D", str(data), "-l", str(self.folder / "log"), "-o", options,
             "-w", "-t", "60", "start"])
        with self._admin_connect("postgres") as conn:
            conn.execute(f"CREATE ROLE {SCORER} LOGIN PASSWORD '{SCORER_PASSWORD}' "
                         "NOSUPERUSER NOCREATEDB NOCREATEROLE")
        self.create_database(DEFAULT_DATABASE)
        return self

    def _admin_connect(self, database: str):
        import psycopg

        return psycopg.connect(host=self.host, port=self.port, user=ADMIN, password=ADMIN_PASSWORD,
                               dbname=database, autocommit=True)

    def create_database(self, name: str) -> str:
        """An empty database ``name`` (kept if it exists) whose tables, as the superuser creates
        them, the scorer role may read (SELECT only); returns the scorer's URL of it."""
        with self._admin_connect("postgres") as conn:
            if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
                conn.execute(f'CREATE DATABASE "{name}" OWNER {ADMIN}')
        with self._admin_connect(name) as conn:
            conn.execute(f'GRANT CONNECT ON DATABASE "{name}" TO {SCORER}')
            conn.execute(f"GRANT USAGE ON SCHEMA public TO {SCORER}")
            conn.execute(f"ALTER DEFAULT PRIVILEGES FOR ROLE {ADMIN} IN SCHEMA public "
                         f"GRANT SELECT ON TABLES TO {SCORER}")
            conn.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {SCORER}")
        return self.url(name)

    def url(self, database: str = DEFAULT_DATABASE, admin: bool = False) -> str:
        user, password = (ADMIN, ADMIN_PASSWORD) if admin else (SCORER, SCORER_PASSWORD)
        return f"postgresql://{user}:{password}@{self.host}:{self.port}/{database}"

    def stop(self) -> None:
        if self.folder is None:
            return
        command = [str(self.bin / "pg_ctl"), "-D", str(self.folder / "data"), "-m", "immediate", "-w", "stop"]
        subprocess.run(_as("postgres", command) if _is_root() else command, check=False,
                       capture_output=True, timeout=60)
        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder = None

    def __enter__(self) -> Self:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *_) -> None:
        self.stop()


# --------------------------------------------------------------------------------------- MariaDB


class MariaDBServer:
    """A MariaDB (or MySQL) server in a temporary folder, listening on 127.0.0.1:``port``."""

    def __init__(self) -> None:
        self.server = shutil.which("mariadbd") or shutil.which("mysqld") or (
            "/usr/sbin/mariadbd" if Path("/usr/sbin/mariadbd").exists() else None)
        self.install = shutil.which("mariadb-install-db") or shutil.which("mysql_install_db")
        if self.server is None or self.install is None:
            raise ServerUnavailable("MariaDB server binaries (mariadbd, mariadb-install-db) not found: "
                                    "install Debian's mariadb-server package")
        try:
            import pymysql  # noqa: F401
        except ImportError:
            raise ServerUnavailable("pymysql is not installed: pip install '.[mysql]'") from None
        self.host, self.port = "127.0.0.1", free_port()
        self.folder: Path | None = None
        self.process: subprocess.Popen | None = None

    def start(self) -> MariaDBServer:
        self.folder = (_owned_tmpdir("rat-mariadb-", "mysql") if _is_root()
                       else Path(tempfile.mkdtemp(prefix="rat-mariadb-")))
        data = self.folder / "data"
        user = ["--user=mysql"] if _is_root() else []
        done = subprocess.run([self.install, "--no-defaults", f"--datadir={data}", *user,
                               "--auth-root-authentication-method=normal", "--skip-test-db"],
                              check=False, capture_output=True, text=True, timeout=180)
        if done.returncode:
            raise RuntimeError(f"mariadb-install-db failed: {done.stderr.strip()[-500:]}")
        self.socket = self.folder / "mysqld.sock"
        self.log = open(self.folder / "log", "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [self.server, "--no-defaults", f"--datadir={data}", *user, f"--port={self.port}",
             f"--bind-address={self.host}", f"--socket={self.socket}",
             f"--pid-file={self.folder / 'mysqld.pid'}", "--skip-name-resolve", "--skip-log-bin",
             "--innodb-buffer-pool-size=32M", "--innodb-flush-log-at-trx-commit=0",
             "--character-set-server=utf8mb4", "--collation-server=utf8mb4_general_ci",
             # table names as SQL writes them in any case (Spider's `FROM Singer` on `singer`),
             # as on MySQL's Windows and macOS defaults
             "--lower-case-table-names=1"],
            stdout=self.log, stderr=subprocess.STDOUT)
        import pymysql

        deadline = time.monotonic() + 60
        while True:
            try:
                conn = pymysql.connect(unix_socket=str(self.socket), user="root", autocommit=True)
                break
            except pymysql.err.OperationalError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    tail = (self.folder / "log").read_text(errors="replace")[-500:]
                    raise RuntimeError(f"mariadbd did not start: {tail}") from None
                time.sleep(0.2)
        with conn, conn.cursor() as cursor:
            cursor.execute(f"CREATE USER '{ADMIN}'@'%' IDENTIFIED BY '{ADMIN_PASSWORD}'")
            cursor.execute(f"GRANT ALL PRIVILEGES ON *.* TO '{ADMIN}'@'%' WITH GRANT OPTION")
            cursor.execute(f"CREATE USER '{SCORER}'@'%' IDENTIFIED BY '{SCORER_PASSWORD}'")
        self.create_database(DEFAULT_DATABASE)
        return self

    def create_database(self, name: str) -> str:
        """An empty database ``name`` (kept if it exists) the scorer role may read (SELECT only);
        returns the scorer's URL of it."""
        import pymysql

        conn = pymysql.connect(host=self.host, port=self.port, user=ADMIN, password=ADMIN_PASSWORD,
                               autocommit=True)
        with conn, conn.cursor() as cursor:
            cursor.execute(f"CREATE DATABASE IF NOT EXISTS `{name}` CHARACTER SET utf8mb4")
            cursor.execute(f"GRANT SELECT ON `{name}`.* TO '{SCORER}'@'%'")
        return self.url(name)

    def url(self, database: str = DEFAULT_DATABASE, admin: bool = False) -> str:
        user, password = (ADMIN, ADMIN_PASSWORD) if admin else (SCORER, SCORER_PASSWORD)
        return f"mysql+pymysql://{user}:{password}@{self.host}:{self.port}/{database}"

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None
            self.log.close()
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None

    def __enter__(self) -> Self:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *_) -> None:
        self.stop()


# -------------------------------------------------------------------------------------- fixtures


def _serve(kind):
    try:
        server = kind()
    except ServerUnavailable as reason:
        pytest.skip(str(reason))
    with server:
        yield server


@pytest.fixture(scope="session")
def postgres_server():
    """A running PostgreSQL server (``PostgresServer``) for the whole session."""
    yield from _serve(PostgresServer)


@pytest.fixture(scope="session")
def postgres_url(postgres_server) -> str:
    """The read-only scorer role's URL of the PostgreSQL database ``rat``."""
    return postgres_server.url()


@pytest.fixture(scope="session")
def postgres_admin_url(postgres_server) -> str:
    """The superuser's URL of the PostgreSQL database ``rat`` (to load data)."""
    return postgres_server.url(admin=True)


@pytest.fixture(scope="session")
def mysql_server():
    """A running MariaDB server (``MariaDBServer``) for the whole session."""
    yield from _serve(MariaDBServer)


@pytest.fixture(scope="session")
def mysql_url(mysql_server) -> str:
    """The read-only scorer role's URL of the MariaDB database ``rat``."""
    return mysql_server.url()


@pytest.fixture(scope="session")
def mysql_admin_url(mysql_server) -> str:
    """The superuser's URL of the MariaDB database ``rat`` (to load data)."""
    return mysql_server.url(admin=True)
