"""Parameter sweeps: many replays of traces x clusters x policies, executed in
parallel (worker processes, or a Dask cluster) and cached by run key.

:func:`run_sweep` executes :class:`SweepRun` descriptions and returns their
:class:`RunRecord` figures; :func:`write_results` writes the results table and
:func:`plot_comparison` the comparison plots. ``xce sweep`` reads a study file
into runs (:mod:`xce_core.cli`).
"""

from xce_core.sim.sweep._cache import ResultCache
from xce_core.sim.sweep._execute import (
    RunFinished,
    SweepError,
    SweepInterrupted,
    SweepOutcome,
    dask_distributed,
    default_jobs,
    run_sweep,
)
from xce_core.sim.sweep._plots import PLOT_FILES, check_plots, plot_comparison, queue_length
from xce_core.sim.sweep._runs import (
    CACHE_FORMAT,
    TIMING_COLUMNS,
    ClusterVariant,
    PolicyVariant,
    RunMetrics,
    RunRecord,
    SweepRun,
    TraceInput,
    file_sha256,
    xce_version,
)
from xce_core.sim.sweep._table import (
    RESULT_COLUMNS,
    Row,
    check_results_format,
    result_rows,
    write_results,
)
from xce_core.sim.sweep._worker import execute_run

__all__ = [
    "CACHE_FORMAT",
    "PLOT_FILES",
    "RESULT_COLUMNS",
    "TIMING_COLUMNS",
    "ClusterVariant",
    "PolicyVariant",
    "ResultCache",
    "RunFinished",
    "RunMetrics",
    "RunRecord",
    "Row",
    "SweepError",
    "SweepInterrupted",
    "SweepOutcome",
    "SweepRun",
    "TraceInput",
    "check_plots",
    "check_results_format",
    "dask_distributed",
    "default_jobs",
    "execute_run",
    "file_sha256",
    "plot_comparison",
    "queue_length",
    "result_rows",
    "run_sweep",
    "write_results",
    "xce_version",
]
