"""GetOperationStatus's progress update (``progressUpdateResponse``, HiveServer2's
TProgressUpdateResp), which beeline draws in place on stderr as HiveServer2's Tez bar:
one row per Spark stage of the statement (:func:`dfsql.spark.progress.stages`), its
tasks total, completed, running and pending, and the share of tasks done.

beeline formats the header and each row with nine columns, so every row has nine cells
(a row of another length would fail in the client). It draws the bar only once the
operation log has shown a line (:meth:`dfsql.server.operations.Operation.log` gives the
first stage line, then leaves the stages to the bar).
"""

from __future__ import annotations

from dfsql.server.tcli import ttypes as tt
from dfsql.spark.progress import Stage

HEADERS = ["STAGES", "JOB", "STATUS", "TOTAL", "COMPLETED", "RUNNING", "PENDING", "FAILED",
           "KILLED"]
NOT_AVAILABLE = tt.TProgressUpdateResp(headerNames=[], rows=[], progressedPercentage=0.0,
                                       status=tt.TJobExecutionStatus.NOT_AVAILABLE,
                                       footerSummary="", startTime=0)


def update(stages: list[Stage], started_ms: int, complete: bool) -> tt.TProgressUpdateResp:
    """The bar of ``stages`` (``complete``: the statement has finished, every stage
    shown as done)."""
    rows = []
    done = tasks = finished = 0
    for s in stages:
        completed = s.tasks if complete else s.completed
        active = 0 if complete else s.active
        status = "SUCCEEDED" if completed >= s.tasks else "RUNNING" if s.started else "PENDING"
        finished += completed >= s.tasks
        rows.append([f"Stage-{s.id}", str(s.job), status, str(s.tasks), str(completed),
                     str(active), str(max(0, s.tasks - completed - active)), str(s.failed),
                     "0"])
        done += completed
        tasks += s.tasks
    return tt.TProgressUpdateResp(
        headerNames=HEADERS, rows=rows,
        progressedPercentage=done / tasks if tasks else float(complete),
        status=tt.TJobExecutionStatus.COMPLETE if complete else
        tt.TJobExecutionStatus.IN_PROGRESS,
        footerSummary=f"STAGES: {finished:02d}/{len(stages):02d}", startTime=started_ms)
