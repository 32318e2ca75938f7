"""dfsql: streaming SQL with the Dataflow model (windows, triggers, watermarks,
accumulation and retractions) on Apache Spark."""

from dfsql.api import dropped_late, explain, register, sql
from dfsql.errors import DfsqlError


def session(*args, **kwargs):
    """Create or reuse the SparkSession dfsql runs on (see :mod:`dfsql.session`)."""
    from dfsql.session import session as _session

    return _session(*args, **kwargs)


__all__ = ["sql", "explain", "register", "session", "dropped_late", "DfsqlError"]
__version__ = "0.1.0"
