"""dfsql: streaming SQL with the Dataflow model (windows, triggers, watermarks,
accumulation and retractions) on Apache Spark."""

from dfsql.api import dropped_late, explain, register, sql
from dfsql.errors import DfsqlError
from dfsql.session import session  # pyspark is imported only when session() is called

__all__ = ["sql", "explain", "register", "session", "dropped_late", "DfsqlError"]
__version__ = "0.1.0"
