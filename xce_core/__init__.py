"""xce's scheduler core: events in, decisions out.

Public API (everything else is private):

- Language: :func:`parse_resreq`, :func:`format_resreq`, :func:`compile_select`
  and the requirement tree types.
- Core: :class:`SchedulerCore`, :class:`SchedulerConfig`, :func:`open_scheduler`,
  :func:`process_events`, :func:`run_events`.
- Plugins: :class:`Allocator`, :class:`Picker`, :class:`Registry`, and the
  iterator pieces allocators build on (:class:`PlanStream`, :class:`HostIterator`,
  :func:`allocate_plans`, :func:`allocate_single`, :class:`SchedContext`).
"""

from xce_core._api import Scheduler, open_scheduler, process_events, run_events
from xce_core._cache import UnsatisfiableCache
from xce_core._clock import Clock, MonotonicClock, VirtualClock
from xce_core._config import SchedulerConfig
from xce_core._context import AllocMode, PendReason, Reason, SchedContext, Want
from xce_core._core import SchedulerCore, SessionStats
from xce_core._errors import PluginError, ResReqSyntaxError, XceError
from xce_core._iterators import (
    Allocator,
    HostIterator,
    Plan,
    PlanIterator,
    PlanStream,
    PrimaryRequest,
    allocate_plans,
    allocate_single,
    balanced_partition,
)
from xce_core._model import Job, JobState, Queue, Worker
from xce_core._pickers import FcfsPicker, Picker
from xce_core._registry import Registry, default_registry
from xce_core._resreq_parse import format_resreq, parse_resreq
from xce_core._resreq_types import (
    Alternative,
    Compound,
    HostValues,
    OrderKey,
    Primary,
    ResReq,
    RusageTerm,
    SelectExpr,
    Span,
)
from xce_core._select import compile_select
from xce_core._session import CandidateSet, SessionScratch
from xce_core._state import ClusterState

__all__ = [
    "AllocMode",
    "Allocator",
    "Alternative",
    "CandidateSet",
    "Clock",
    "ClusterState",
    "Compound",
    "FcfsPicker",
    "HostIterator",
    "HostValues",
    "Job",
    "JobState",
    "MonotonicClock",
    "OrderKey",
    "PendReason",
    "Picker",
    "Plan",
    "PlanIterator",
    "PlanStream",
    "PluginError",
    "Primary",
    "PrimaryRequest",
    "Queue",
    "Reason",
    "Registry",
    "ResReq",
    "ResReqSyntaxError",
    "RusageTerm",
    "SchedContext",
    "Scheduler",
    "SchedulerConfig",
    "SchedulerCore",
    "SelectExpr",
    "SessionScratch",
    "SessionStats",
    "Span",
    "UnsatisfiableCache",
    "VirtualClock",
    "Want",
    "Worker",
    "XceError",
    "allocate_plans",
    "allocate_single",
    "balanced_partition",
    "compile_select",
    "default_registry",
    "format_resreq",
    "open_scheduler",
    "parse_resreq",
    "process_events",
    "run_events",
]
