"""The ``dfsql`` command.

``dfsql`` alone opens the interactive shell on local Spark (``--master URL`` for a
cluster, ``--remote sc://…`` for Spark Connect); ``dfsql -e "query"`` and ``dfsql -f
file.sql`` run statements without a prompt and exit non-zero on the first error (so does
a script piped in). Subcommands: ``demo`` (the README demo), ``run FILE``, ``explain
FILE``, ``serve`` (the HiveServer2-compatible endpoint), ``beeline ARGS`` (Hive's
beeline, pyspark's, for that endpoint), ``passwd FILE USER`` (its password file) and
``help TOPIC`` (a section of the language reference).

Errors in a query print as ``line L, col C: message`` with a hint and exit 1 — no stack
trace for a user's mistake.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import dfsql
from dfsql.connections import from_flags
from dfsql.errors import DfsqlError
from dfsql.language.costs import (
    set_max_trigger_nodes,
    set_max_windowed_queries,
    set_max_windows_per_row,
)
from dfsql.serve_flags import limit_flags as _limit_flags
from dfsql.serve_flags import seconds as _seconds
from dfsql.session import (  # dfsql.cli.EXAMPLES, as before
    EXAMPLES,
    SERVE_TASK_SLOTS,
    register_paper_tables,
)
from dfsql.shell import (
    reference_help as docs_help,  # re and importlib.resources only: light at start-up
)
from dfsql.spark import progress_bar

if TYPE_CHECKING:
    from dfsql.shell.repl import Shell


def _statements(path: Path) -> list[str]:
    """The file's statements, split at semicolons outside strings and comments (the
    shell's splitter: ``dfsql run`` and ``dfsql -f`` cut a file the same way)."""
    # here, not at the top: the splitter's scanner loads dfsql.model (numpy), which
    # ``dfsql passwd`` and ``--help`` need not wait for
    from dfsql.shell.script import split

    return [piece.text for piece in split(path.read_text())]


def _run_text(text: str, spark, show: bool = True) -> None:
    from dfsql.shell.progress import progress  # its thread (threading) only once a query runs

    with progress(spark):
        df = dfsql.sql(text, spark)
        if show and df is not None:
            rows = df.limit(101).collect()
    if show and df is not None:
        _print_table(df.columns, rows)


def _print_table(columns: list[str], rows: list, limit: int = 100) -> None:
    """Rows as an aligned text table (what Spark's show() prints, without a second job)."""
    cells = [["NULL" if v is None else str(v) for v in r] for r in rows[:limit]]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    print(rule)
    print("| " + " | ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)) + " |")
    print(rule)
    for r in cells:
        print("| " + " | ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) + " |")
    print(rule)
    if len(rows) > limit:
        print(f"(only the first {limit} rows shown)")


def demo(_args: argparse.Namespace) -> int:
    spark = dfsql.session()
    register_paper_tables(spark)
    print("dfsql demo: the Dataflow paper's running example (ten values, total 51)\n")
    print("Plain Spark SQL passes through unchanged:")
    spark_sql = "SELECT key, COUNT(*) AS n, SUM(value) AS total FROM scores GROUP BY key"
    print(f"  {spark_sql}")
    _run_text(spark_sql, spark)
    print()
    failures = 0
    for path in sorted((EXAMPLES / "paper").glob("*.sql")):
        text = _statements(path)[0]
        print(f"== {path.stem}: {path.read_text().splitlines()[0].lstrip('- ')}")
        print("\n".join(ln for ln in text.splitlines() if not ln.startswith("--")))
        try:
            _run_text(text, spark)
        except DfsqlError as e:
            print(f"error: {e}")
            failures += 1
        print()
    if failures:
        print(f"{failures} example(s) failed")
    return 1 if failures else 0


def run(args: argparse.Namespace) -> int:
    spark = dfsql.session()
    if args.paper_tables:
        register_paper_tables(spark)
    for text in _statements(Path(args.file)):
        _run_text(text, spark)
    return 0


def explain(args: argparse.Namespace) -> int:
    for text in _statements(Path(args.file)):
        print(dfsql.explain(text))
    return 0


def serve(args: argparse.Namespace) -> int:
    # each subcommand loads only its own interface: the server's Thrift stack here, the
    # shell's prompt_toolkit and rich in shell()
    import threading

    from dfsql.server import (
        EXIT_SPARK_DIED,
        Server,
        console,
        end_spark,
        parse_streams,
        stop_on_sigterm,
    )

    if args.host not in ("127.0.0.1", "localhost", "::1") and not args.allow_remote:
        raise DfsqlError(f"--host {args.host} would accept clients from other machines",
                         hint="add --allow-remote to mean it (and use --auth PLAIN)")
    if args.http_path is not None and args.transport_mode != "http":
        raise DfsqlError("--http-path is the path of the HTTP transport",
                         hint="add --transport-mode http")
    streams = parse_streams(args.stream)
    from_flags(args.connection, args.connection_password_file)  # before kept queries start
    spark = dfsql.session(task_slots=args.task_slots)
    for view in streams:  # columns Spark cannot read: one error now, not one per login
        view.struct(spark)

    def setup(session) -> None:
        if args.paper_tables:
            register_paper_tables(session)
        for view in streams:
            view.register(session)

    def spark_died(reason: str) -> None:
        # one line on stderr for the supervisor's log, then the exit: the main thread
        # returns the status once the server has stopped; should closing the sessions
        # hang on what is left of Spark, a timer ends the process all the same
        print(f"dfsql serve: {reason}; exiting with status {EXIT_SPARK_DIED}",
              file=sys.stderr, flush=True)
        backstop = threading.Timer(10.0, os._exit, (EXIT_SPARK_DIED,))
        backstop.daemon = True
        backstop.start()

    if args.max_windows_per_row is not None:  # bounds of the parser: for the process
        set_max_windows_per_row(args.max_windows_per_row)
    if args.max_trigger_nodes is not None:
        set_max_trigger_nodes(args.max_trigger_nodes)
    if args.max_windowed_queries is not None:
        set_max_windowed_queries(args.max_windowed_queries)
    roots = None if args.allow_any_path else args.data_root
    # the limits given (the parser's defaults are None: the Server's own hold)
    limits = {k: v for k in ("max_message_mb", "max_connections", "idle_connection_timeout",
                             "login_timeout", "max_connections_per_user",
                             "max_sessions_per_user", "max_fetch_rows", "max_statement_kb",
                             "max_nesting", "max_partition_mb", "max_streaming_queries_per_user")
              if (v := getattr(args, k)) is not None}
    server = Server(spark, args.host, args.port, args.auth, args.password_file,
                    session_setup=setup, data_roots=roots, on_spark_death=spark_died,
                    allow_jvm_functions=args.allow_jvm_functions,
                    statement_timeout=args.statement_timeout,
                    idle_session_timeout=args.idle_session_timeout,
                    idle_operation_timeout=args.idle_operation_timeout,
                    state_dir=args.state_dir, streams=streams,
                    transport_mode=args.transport_mode,
                    http_path=args.http_path or "cliservice", admins=args.admin,
                    private_objects=args.private_objects, metrics_port=args.metrics_port,
                    progress_batches=args.progress_batches, **limits).start()
    for r in server.restarted:  # one line each, for the supervisor's log
        print(f"dfsql serve: {r}", file=sys.stdout if r.ok else sys.stderr, flush=True)
    print(f"dfsql serving HiveServer2 on {server.host}:{server.port} (auth {server.auth}, "
          f"{server.transport_mode}); dfsql beeline -u '{server.url()}'" + (
              f"; metrics on {server.metrics.url}" if server.metrics else ""), flush=True)
    console.start_console(server, args.ui_port)  # --ui-port: the web console, until the server stops
    stop_on_sigterm(server, spark)  # a supervisor's stop: orderly, the JVM with it
    server.serve_forever()
    if server.failure:
        return EXIT_SPARK_DIED
    end_spark(spark)
    return 0


def passwd(args: argparse.Namespace) -> int:
    import getpass

    # the endpoint's package (socket, logging, threading) only for this command
    from dfsql.server.auth import set_password

    if sys.stdin.isatty():
        password = getpass.getpass(f"password for {args.user}: ")
    else:
        password = sys.stdin.readline().rstrip("\n")
    if not password:
        raise DfsqlError("an empty password", hint="type the password, or pipe it in")
    set_password(args.file, args.user, password)
    print(f"{args.user} set in {args.file}")
    return 0


def shell(args: argparse.Namespace) -> int:
    """The shell: interactive on a terminal, else the -e texts, -f files or stdin."""
    # prompt_toolkit, rich and the parser (about 0.4 s): only the shell waits for them
    from dfsql.shell.repl import Quit, Shell

    sh = Shell(paper_tables=args.paper_tables, history=args.history)
    try:
        return _run_scripts(sh, args)
    except Quit:  # \q in a script or at the prompt: leave, successfully
        return 0


def _run_scripts(sh: Shell, args: argparse.Namespace) -> int:
    """The -e/-f scripts in command-line order, else standard input, else the prompt."""
    if args.scripts:
        for kind, value in args.scripts:  # in command-line order
            if kind == "file":
                try:
                    text, where = Path(value).read_text(), f"{value}: "
                except OSError as e:
                    raise DfsqlError(f"cannot read {value}: {e.strerror}",
                                     hint="dfsql -f takes a file of statements") from None
            else:
                text, where = value, ""
            if sh.run_script(text, where=where) != 0:
                return 1
        return 0
    if not sys.stdin.isatty():
        return sh.run_script(sys.stdin.read(), where="<stdin>: ")
    return sh.interactive()


def help_topic(args: argparse.Namespace) -> int:
    """``dfsql help WINDOW``: that section of the shipped reference; no topic lists the
    topics; an unknown one lists them on stderr and exits 1 (a script can tell)."""
    topic = " ".join(args.topic)
    if not topic:
        print("dfsql help TOPIC prints that section of the language reference. Topics:\n  "
              + "\n  ".join(docs_help.topics()))
        return 0
    text = docs_help.section(topic)
    if text is None:
        print(docs_help.unknown_topic(topic), file=sys.stderr)
        return 1
    print(text, end="")
    return 0


def _parser() -> argparse.ArgumentParser:
    """The command line: the shell's options and one subparser per subcommand."""
    parser = argparse.ArgumentParser(
        prog="dfsql", description="dfsql: streaming SQL with the Dataflow model on Spark. "
        "Without a subcommand: the interactive shell (or -e / -f / a script on stdin).")
    parser.add_argument("--master", help="a Spark master URL (spark://..., yarn, local[4]) "
                                         "instead of local[2]")
    parser.add_argument("--remote", help="a Spark Connect URL (sc://host:port)")
    # -e and -f share one list, so that they run in the order they were given
    parser.add_argument("-e", "--execute", action="append", dest="scripts", metavar="SQL",
                        type=lambda text: ("sql", text),
                        help="run these statements and exit (repeatable)")
    parser.add_argument("-f", "--file", action="append", dest="scripts", metavar="FILE",
                        type=lambda name: ("file", name),
                        help="run the statements of FILE and exit (repeatable)")
    parser.add_argument("--paper-tables", action="store_true",
                        help="register the paper's example tables (scores, "
                             "paper_watermarks) first")
    parser.add_argument("--warehouse", metavar="DIR",
                        help="where tables are kept across runs, shared by every dfsql "
                             "on it (default $DFSQL_WAREHOUSE, else ./spark-warehouse)")
    parser.add_argument("--history", metavar="FILE",
                        help="the shell's history file (default ~/.dfsql_history, or "
                             "$DFSQL_HISTORY)")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("demo", help="run the paper's running example on local Spark")
    p_run = sub.add_parser("run", help="run the statements of a .sql file")
    p_run.add_argument("file")
    p_run.add_argument("--paper-tables", action="store_true", default=argparse.SUPPRESS,
                       help="register the paper's example tables first")
    p_exp = sub.add_parser("explain", help="show how the statements of a .sql file run")
    p_exp.add_argument("file")
    p_srv = sub.add_parser("serve", help="serve HiveServer2's Thrift protocol (beeline, JDBC, "
                                         "PyHive, SQLAlchemy)")
    for p in (p_run, p_srv):  # also after the subcommand, as --paper-tables
        p.add_argument("--warehouse", metavar="DIR", default=argparse.SUPPRESS,
                       help="where tables are kept across runs (see dfsql --help)")
    _serve_flags(p_srv)
    p_help = sub.add_parser("help", help="print a section of the language reference "
                                         "(dfsql help TRIGGER); no topic: the topics")
    p_help.add_argument("topic", nargs="*")
    # listed here for --help; main() hands everything after "beeline" to beeline itself
    sub.add_parser("beeline", help="Hive's beeline (pyspark's), Spark's home set: dfsql "
                                   "beeline -u jdbc:hive2://127.0.0.1:10000/default",
                   add_help=False)
    p_pw = sub.add_parser("passwd", help="add or replace a user in a password file")
    p_pw.add_argument("file")
    p_pw.add_argument("user")
    return parser


def _serve_flags(p_srv: argparse.ArgumentParser) -> None:
    """``dfsql serve``'s own flags: where it listens, who may log in, what statements
    may touch, its timeouts, and (:func:`_limit_flags`) what one client may cost."""
    p_srv.add_argument("--host", default="127.0.0.1")
    p_srv.add_argument("--port", type=int, default=10000)
    p_srv.add_argument("--auth", default="NONE", choices=["NONE", "NOSASL", "PLAIN"],
                       type=str.upper)
    p_srv.add_argument("--password-file", help="users for --auth PLAIN (dfsql passwd)")
    p_srv.add_argument("--admin", action="append", default=[], metavar="USER",
                       help="a user who may stop any user's continuous queries "
                            "(repeatable; needs --auth PLAIN)")
    p_srv.add_argument("--transport-mode", default="binary", choices=["binary", "http"],
                       type=str.lower, help="binary (Thrift over TCP, SASL) or http (Thrift "
                       "calls POSTed to --http-path, Basic auth); default binary")
    p_srv.add_argument("--http-path", metavar="PATH",
                       help="where the HTTP transport serves (default cliservice: "
                            "beeline's ;transportMode=http;httpPath=cliservice)")
    p_srv.add_argument("--ui-port", type=int, metavar="P", help="serve the read-only web "
                       "console on --host:P (the same users; docs/guides/watching.md)")
    p_srv.add_argument("--allow-remote", action="store_true",
                       help="accept a --host other than loopback")
    p_srv.add_argument("--paper-tables", action="store_true", default=argparse.SUPPRESS,
                       help="register the paper's example tables in every session")
    p_srv.add_argument("--stream", action="append", default=[], metavar="NAME=DIR",
                       help="register the files arriving in DIR as the streaming view NAME "
                            "in every session (repeatable); 'NAME=DIR json (key STRING, "
                            "t TIMESTAMP)' gives the format and columns, and DIR may be "
                            "empty; files must be renamed into DIR whole, in arrival order")
    p_srv.add_argument("--connection", action="append", default=[], metavar="NAME=URL",
                       help="name a database for statements (INTO TABLE NAME.schema.table; "
                            "repeatable): URL is postgresql://USER@HOST[:PORT]/DB, without "
                            "a password (docs/guides/databases.md)")
    p_srv.add_argument("--connection-password-file", action="append", default=[],
                       metavar="NAME=FILE",
                       help="the password of connection NAME, on FILE's first line (else "
                            "libpq's PGPASSWORD or ~/.pgpass)")
    p_srv.add_argument("--state-dir", metavar="DIR",
                       help="keep every CREATE STREAMING QUERY in DIR (its statement, "
                            "checkpoint and table) and start them again, from their "
                            "checkpoints, when the server starts on DIR again")
    p_srv.add_argument("--metrics-port", type=int, metavar="P", help="Prometheus' /metrics on P")
    p_srv.add_argument("--progress-batches", type=int, metavar="N", help="micro-batches "
                       "system.streaming_progress keeps per query (default 10000)")
    p_srv.add_argument("--data-root", action="append", default=[], metavar="DIR",
                       help="a directory under which statements may read and write files "
                            "(repeatable; none by default)")
    p_srv.add_argument("--allow-any-path", action="store_true",
                       help="let statements read and write files anywhere and give "
                            "data sources and functions any option key")
    p_srv.add_argument("--allow-jvm-functions", action="store_true",
                       help="trust clients to run code: reflect/java_method/try_reflect, "
                            "TRANSFORM/MAP/REDUCE ... USING, CREATE FUNCTION, ADD JAR/FILE/"
                            "ARCHIVE, data sources beyond parquet/orc/csv/json/text, SET of "
                            "any setting (refused by default)")
    p_srv.add_argument("--private-objects", action="store_true",
                       help="a client may not read another user's tables, views and global "
                            "temp views either (changing them is their owner's or an "
                            "--admin's always)")
    p_srv.add_argument("--statement-timeout", type=_seconds, default=0, metavar="SECONDS",
                       help="cancel a statement running longer (SQLSTATE HYT00); a client's "
                            "shorter query timeout wins (default: 0, no limit)")
    p_srv.add_argument("--idle-session-timeout", type=_seconds, default=8 * 3600.0,
                       metavar="SECONDS", help="close a session without a call for this "
                       "long and nothing running (default: 28800, 8 hours; 0: never)")
    p_srv.add_argument("--idle-operation-timeout", type=_seconds, default=3600.0,
                       metavar="SECONDS", help="close an ended operation without a call "
                       "for this long (default: 3600, 1 hour; 0: never)")
    p_srv.add_argument("--task-slots", type=int, default=SERVE_TASK_SLOTS, metavar="N",
                       help="Spark task threads on local Spark (without a master given): more than the "
                            "cores, so that one client's few long tasks leave slots for "
                            f"the others' (default {SERVE_TASK_SLOTS}; the parallelism "
                            "stays 2)")
    _limit_flags(p_srv)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["beeline"]:  # its options are beeline's (-u, -n, -e, -f, --help)
        from dfsql.beeline import beeline

        try:
            return beeline(argv[1:])
        except DfsqlError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
    parser = _parser()
    args = parser.parse_args(argv)
    # the shell and `dfsql run` draw their own bars; a server's terminal is not its clients'
    progress_bar.disable()
    if args.master and args.remote:
        parser.error("give --master or --remote, not both")
    # every command's dfsql.session() reads these (every interface shares them)
    if args.warehouse:
        os.environ["DFSQL_WAREHOUSE"] = str(Path(args.warehouse).expanduser().resolve())
    if args.remote:
        os.environ["DFSQL_SPARK_REMOTE"] = args.remote
    elif args.master:
        os.environ.pop("DFSQL_SPARK_REMOTE", None)
        os.environ["DFSQL_SPARK_MASTER"] = args.master
    handler = {None: shell, "demo": demo, "run": run, "explain": explain, "serve": serve,
               "passwd": passwd, "help": help_topic}[args.command]
    try:
        return handler(args)
    except DfsqlError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
