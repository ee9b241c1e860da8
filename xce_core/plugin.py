"""The public API for allocator and picker authors.

An allocator subclasses :class:`Allocator` and yields plans through a
:class:`PlanIterator` (usually a :class:`PlanStream` over a plain generator);
the shared bucket loop (:func:`allocate_plans`) and :class:`HostIterator` place
them, claiming tentatively in the attempt's :class:`SchedContext`. A picker
subclasses :class:`Picker`. Both register by name through the entry-point
groups ``xce.allocators`` and ``xce.pickers`` (see :class:`Registry`).
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
from xce_core._model import Job, Queue, Worker
from xce_core._pickers import FcfsPicker, Picker
from xce_core._registry import Registry
from xce_core._results import AllocMode, PendReason, Reason, Want
from xce_core._session import CandidateSet

__all__ = [
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
    "Registry",
    "SchedContext",
    "Want",
    "Worker",
    "allocate_plans",
    "allocate_single",
    "balanced_partition",
]
