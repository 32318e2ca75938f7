"""The dfsql shell: an interactive REPL for extended SQL, and the runner behind
``dfsql -e`` / ``dfsql -f``.

Built on maintained libraries: prompt_toolkit (editing, history, completion), pygments
(highlighting, through prompt_toolkit), rich (tables, progress bars, live views) and
matplotlib (``\\plot``). Pieces:

* :mod:`dfsql.shell.script` — statement boundaries (``;`` outside strings and comments);
* :mod:`dfsql.shell.jobs` — one statement's Spark work in a job group: Ctrl-C cancels
  exactly its jobs, and a progress bar shows stages and tasks after a second;
* :mod:`dfsql.shell.display` — result tables (pane columns, retractions marked) and
  errors with a caret under their position;
* :mod:`dfsql.shell.lexer` — highlighting and completion of Spark SQL and dfsql's clauses;
* :mod:`dfsql.shell.plot` — a windowed result drawn the way the paper draws its figures
  (its time axes in :mod:`~dfsql.shell.plot_time`, an EXPLAIN FIRINGS result read by
  :mod:`~dfsql.shell.plot_firings`, an EXPLAIN WATERMARK one drawn by
  :mod:`~dfsql.shell.plot_tradeoff`);
* :mod:`dfsql.shell.commands` — the backslash commands that show or read something
  (``\\help``, ``\\d``, ``\\load``);
* :mod:`dfsql.shell.repl` — the shell: its Spark session, statements, the dispatch of
  backslash commands, the prompt.
"""

from __future__ import annotations
