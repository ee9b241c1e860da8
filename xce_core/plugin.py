"""The public API for allocator and picker authors.

An allocator subclasses :class:`Allocator` and yields plans through a
:class:`PlanIterator` (usually a :class:`PlanStream` over a plain generator);
the shared bucket loop (:func:`allocate_plans`) and :class:`HostIterator` place
them, claiming tentatively in the attempt's :class:`SchedContext`. Whether a
bucket fits on a host is one rule, :func:`shortfall` (and its companion
:func:`tasks_that_fit`), also offered on top of an attempt's tentative claims
as :meth:`SchedContext.shortfall` and :meth:`SchedContext.tasks_that_fit`. An
allocator's attempt resolves to a :class:`Status`, which may carry the
:class:`PendReason` the job should pend with. A picker subclasses
:class:`Picker`; one with state of its own (per-user usage, say) also
overrides :meth:`Picker.snapshot_state` and :meth:`Picker.restore_state`, so
that state travels in the core's snapshots (:meth:`SchedulerCore.snapshot`).
Both register by name through the entry-point groups ``xce.allocators`` and
``xce.pickers`` (see :class:`Registry`).
"""

from xce_core._context import SchedContext
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
from xce_core._model import AMOUNT_TOLERANCE, SLOTS, Job, Queue, Worker, shortfall, tasks_that_fit
from xce_core._pickers import FairsharePicker, FcfsPicker, Picker
from xce_core._registry import Registry
from xce_core._results import AllocMode, PendReason, Reason, Status, Want
from xce_core._session import CandidateSet

__all__ = [
    "AMOUNT_TOLERANCE",
    "SLOTS",
    "AllocMode",
    "Allocator",
    "CandidateSet",
    "FairsharePicker",
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
    "Registry",
    "SchedContext",
    "Status",
    "Want",
    "Worker",
    "allocate_plans",
    "allocate_single",
    "balanced_partition",
    "shortfall",
    "tasks_that_fit",
]
