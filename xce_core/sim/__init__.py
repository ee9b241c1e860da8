"""Trace-driven simulation: replay a workload through the scheduler core on
virtual time (:func:`simulate`), read and write Standard Workload Format traces,
describe the simulated cluster, generate synthetic workloads, and report.

This package does file I/O; the core (:mod:`xce_core`) never does. It uses
only the core's public names.
"""

from xce_core.sim._cluster import (
    DEFAULT_MAX_HOSTS,
    MAX_RESOURCE,
    MAX_SLOTS,
    ClusterSpec,
    HostGroup,
    SimulationError,
    default_cluster,
    load_cluster,
)
from xce_core.sim._outcomes import OutcomeColumns, OutcomeTable
from xce_core.sim._replay import Progress, job_request, run_limit, simulate
from xce_core.sim._report import (
    BOUNDED_SLOWDOWN_TAU,
    JobOutcome,
    SimResult,
    SimSummary,
    check_plot,
    format_table,
    plot_timeline,
    summarize,
    timeline,
    write_schedule,
)
from xce_core.sim._swf import MAX_LINE_BYTES, SwfTrace, TraceError, iter_swf, read_swf, write_swf
from xce_core.sim._swf_record import (
    MAX_INTEGER,
    MAX_MEMORY_KB,
    MAX_SECONDS,
    SWF_FIELDS,
    SwfJob,
    field_limit,
    header_int,
    parse_swf_line,
)
from xce_core.sim._workload import (
    MAX_LOAD,
    MAX_RUNTIME,
    MIN_LOAD,
    WorkloadModel,
    generate_jobs,
    swf_header,
)

__all__ = [
    "BOUNDED_SLOWDOWN_TAU",
    "DEFAULT_MAX_HOSTS",
    "MAX_INTEGER",
    "MAX_LINE_BYTES",
    "MAX_LOAD",
    "MAX_MEMORY_KB",
    "MAX_RESOURCE",
    "MAX_RUNTIME",
    "MAX_SECONDS",
    "MAX_SLOTS",
    "MIN_LOAD",
    "SWF_FIELDS",
    "ClusterSpec",
    "HostGroup",
    "JobOutcome",
    "OutcomeColumns",
    "OutcomeTable",
    "Progress",
    "SimResult",
    "SimSummary",
    "SimulationError",
    "SwfJob",
    "SwfTrace",
    "TraceError",
    "WorkloadModel",
    "check_plot",
    "default_cluster",
    "field_limit",
    "format_table",
    "generate_jobs",
    "header_int",
    "iter_swf",
    "job_request",
    "load_cluster",
    "parse_swf_line",
    "plot_timeline",
    "read_swf",
    "run_limit",
    "simulate",
    "summarize",
    "swf_header",
    "timeline",
    "write_schedule",
    "write_swf",
]
