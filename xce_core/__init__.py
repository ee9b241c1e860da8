"""xce's scheduler core: events in, decisions out.

What an embedder needs is here: :func:`open_scheduler` (an async controller),
:class:`SchedulerCore` (the synchronous core under it), :class:`SchedulerLoop`
(the one loop that drives a core, for drivers of their own),
:func:`process_events` and :func:`run_events` (tests and scripts),
:class:`SchedulerConfig`, the clocks, and the errors. Other audiences have
their own public modules:

- :mod:`xce_core.resreq`: the resource-requirement language;
- :mod:`xce_core.plugin`: allocator and picker authors;
- :mod:`xce_core.sim`: trace replay; :mod:`xce_core.cli`: the ``xce`` command.

Everything in a module whose name starts with ``_`` is private.
"""

from typing import Any

from xce_core._api import (
    DECISION_BUFFER,
    Scheduler,
    SchedulerStatistics,
    open_scheduler,
    process_events,
    run_events,
)
from xce_core._clock import Clock, MonotonicClock, VirtualClock
from xce_core._config import BACKFILL_MODES, SchedulerConfig
from xce_core._core import SchedulerCore
from xce_core._errors import PluginError, ResReqSyntaxError, SnapshotError, XceError
from xce_core._faults import InternalErrorHook, internal_error_text
from xce_core._loop import DecisionSink, SchedulerLoop
from xce_core._model import JobState
from xce_core._registry import Registry, default_registry
from xce_core._results import SessionStats
from xce_core.resreq import format_resreq, parse_resreq

__all__ = [
    "BACKFILL_MODES",
    "DECISION_BUFFER",
    "Clock",
    "DecisionSink",
    "InternalErrorHook",
    "JobState",
    "MonotonicClock",
    "PluginError",
    "Registry",
    "ResReqSyntaxError",
    "Scheduler",
    "SchedulerConfig",
    "SchedulerCore",
    "SchedulerLoop",
    "SchedulerStatistics",
    "SessionStats",
    "SnapshotError",
    "VirtualClock",
    "XceError",
    "default_registry",
    "format_resreq",
    "internal_error_text",
    "open_scheduler",
    "parse_resreq",
    "process_events",
    "run_events",
]

# Names that moved to xce_core.plugin or xce_core.resreq: still importable from
# here for existing code, with a DeprecationWarning naming the new home.
_MOVED = {
    **dict.fromkeys(
        [
            "AllocMode",
            "Allocator",
            "CandidateSet",
            "FcfsPicker",
            "HostIterator",
            "Job",
            "PendReason",
            "Picker",
            "Plan",
            "PlanIterator",
            "PlanStream",
            "PrimaryRequest",
            "Queue",
            "Reason",
            "SchedContext",
            "Want",
            "Worker",
            "allocate_plans",
            "allocate_single",
            "balanced_partition",
        ],
        "xce_core.plugin",
    ),
    **dict.fromkeys(
        [
            "Alternative",
            "Compound",
            "HostValues",
            "OrderKey",
            "Primary",
            "ResReq",
            "RusageTerm",
            "SelectExpr",
            "Span",
            "compile_select",
        ],
        "xce_core.resreq",
    ),
}


def __getattr__(name: str) -> Any:
    module = _MOVED.get(name)
    if module is None:
        raise AttributeError(f"module 'xce_core' has no attribute {name!r}")
    import importlib
    import warnings

    warnings.warn(f"xce_core.{name} moved to {module}.{name}", DeprecationWarning, stacklevel=2)
    return getattr(importlib.import_module(module), name)
