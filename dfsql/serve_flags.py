"""``dfsql serve``'s flags that bound what clients send and cost, and the types of its
timeouts and bounds on the command line (:mod:`dfsql.cli` builds the parser)."""

from __future__ import annotations

import argparse


def seconds(text: str) -> float:
    """A timeout on the command line: seconds, 0 for none."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if value < 0 or value != value:
        raise argparse.ArgumentTypeError(f"a timeout is 0 (none) or more seconds: {text!r}")
    return value


def bound(text: str) -> int:
    """A count bound on the command line: 0 (none) or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"a bound is 0 (none) or more: {text!r}")
    return value


def limit_flags(p: argparse.ArgumentParser) -> None:
    """``dfsql serve``'s bounds on what clients send and cost (unset: the Server's
    defaults, which the help states)."""
    p.add_argument("--max-message-mb", type=float, metavar="MB",
                   help="the largest SASL frame, HTTP body, Thrift string or method name "
                        "a client may announce (and an eighth as many list elements); a "
                        "larger announcement closes its connection before anything is "
                        "read (default 64)")
    p.add_argument("--max-connections", type=int, metavar="N",
                   help="connections served at once; more wait for a slot, in arrival "
                        "order, up to the login timeout, then are closed with a log line "
                        "(default 100)")
    p.add_argument("--idle-connection-timeout", type=float, metavar="SECONDS",
                   help="close a connection that sends nothing (or takes no reply) for "
                        "this long, one stuck in its SASL handshake too (default 3600; 0: "
                        "never)")
    p.add_argument("--login-timeout", type=seconds, metavar="SECONDS",
                   help="close a connection not logged in this long after it arrived "
                        "(SASL handshake, or its first call or HTTP request read whole), "
                        "however it trickles (default 20; 0: never)")
    p.add_argument("--max-connections-per-user", type=int, metavar="N",
                   help="connections one logged-in user may hold at once; more are "
                        "refused at login (default 20; 0: no limit)")
    p.add_argument("--max-sessions-per-user", type=int, metavar="N",
                   help="sessions one user may hold open at once; OpenSession past it "
                        "is an error, SQLSTATE 54000 (default 20; 0: no limit)")
    p.add_argument("--max-streaming-queries-per-user", type=int, metavar="N",
                   help="continuous queries one user (an --admin too) may hold, running "
                        "or kept but failed; CREATE STREAMING QUERY past it is refused, "
                        "SQLSTATE 54000 (default 10; 0: no limit)")
    p.add_argument("--max-fetch-rows", type=int, metavar="N",
                   help="the most rows one FetchResults returns, whatever the client "
                        "asks (default 10000; 0: no limit)")
    p.add_argument("--max-statement-kb", type=float, metavar="KB",
                   help="refuse a longer statement, SQLSTATE 54000 (default 1024; 0: "
                        "no limit)")
    p.add_argument("--max-nesting", type=int, metavar="N",
                   help="refuse a statement with parentheses nested deeper, SQLSTATE "
                        "54000, before it is parsed (default 256; 0: no limit)")
    p.add_argument("--max-windows-per-row", type=bound, metavar="N",
                   help="refuse a WINDOW SLIDING(size, EVERY period) that puts each row in "
                        "more windows (size / period), SQLSTATE 54000, before it is "
                        "planned (default 1000; 0: no limit)")
    p.add_argument("--max-trigger-nodes", type=bound, metavar="N",
                   help="refuse a TRIGGER clause whose tree has more nodes, SQLSTATE "
                        "54000, before it is planned (default 1000; 0: no limit)")
    p.add_argument("--max-windowed-queries", type=bound, metavar="N",
                   help="refuse a statement with more windowed queries (WINDOW clauses), "
                        "SQLSTATE 54000, before they are planned (default 100; 0: no "
                        "limit)")
    p.add_argument("--max-partition-mb", type=float, metavar="MB",
                   help="fail a statement one of whose result partitions grows past "
                        "this (estimated from its column types), SQLSTATE 54000, "
                        "before the server holds it (default 128; 0: no limit)")
