"""Per-job outcomes of a replay: :class:`JobOutcome`, and :class:`OutcomeTable`, which
holds a whole replay's outcomes compactly.

A replay of 200,000 jobs on 1,024 hosts allocates some 19 million ``(host, slots)``
pairs; as Python objects they took over a gigabyte. The table keeps one array per
field instead (a few dozen bytes a job), and an allocation as runs of consecutive
hosts (in the cluster's order) with the same slot count: an allocator places a
parallel job on a few such runs, rarely more. :class:`JobOutcome` objects are
built only when read, equal to those the replay used to keep.
"""

from __future__ import annotations

import itertools
import math
import operator
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import compress
from typing import Final, Literal, final, overload

import msgspec

from events import HostSlots

__all__ = [
    "STATUS_NAMES",
    "JobOutcome",
    "OutcomeArrays",
    "OutcomeColumns",
    "OutcomeTable",
    "SeriesRecorder",
    "Status",
]

Status = Literal["started", "rejected", "never_started", "pending", "unreplayed"]

_NEVER_STARTED: Final = 0
_STARTED: Final = 1
_REJECTED: Final = 2
# Only in a replay that was stopped before its end: submitted and not started
# yet (pending), or not submitted yet (unreplayed).
_PENDING: Final = 3
_UNREPLAYED: Final = 4
# Slot counts an OutcomeTable keeps its hosts as HostSlots for (_hosts_in_order).
_UNSEEN: Final[list[HostSlots]] = []
_IN_ORDER_SLOT_COUNTS: Final = 4
# Hosts named by allocations an OutcomeTable holds as given before making them
# runs (_pack): a few MB of HostSlots at most.
_PACK_AT: Final = 65_536
STATUS_NAMES: Final[tuple[Status, ...]] = (
    "never_started",
    "started",
    "rejected",
    "pending",
    "unreplayed",
)


class JobOutcome(msgspec.Struct, kw_only=True, gc=False):
    """What happened to one job. ``start``, ``end`` and ``wait`` are set only for
    started jobs; ``hosts`` is the allocation as ``(host, slots)`` pairs; ``reason``
    says why a job was rejected or never started (for a job that never started,
    the category of the last ``job_pended`` the core sent for it, and ``detail``
    that decision's detail). ``pending`` and ``unreplayed`` are statuses of a
    replay stopped before its end (see :class:`OutcomeTable`)."""

    job_id: str
    submit: float
    run_time: float
    procs: int
    status: Status = "never_started"
    start: float | None = None
    end: float | None = None
    wait: float | None = None
    hosts: list[tuple[str, int]] = []
    reason: str = ""
    detail: str = ""
    user: str = ""
    queue: str = ""

    @property
    def slots(self) -> int:
        """Slots held while running (0 if the job never started)."""
        return sum(n for _, n in self.hosts)


@dataclass(frozen=True, slots=True)
class OutcomeColumns:
    """What the summary and the timeline read of a replay's outcomes, by column.

    ``rejected_reasons`` holds the reason of every rejected job, ``queued_submits``
    and ``queued_procs`` the submit time and size of every job the replay
    submitted (not rejected, not unreplayed); ``run_time`` to ``slots`` are of
    started jobs only. All in trace order. ``pending`` and ``unreplayed`` count
    the jobs of those statuses (a replay stopped before its end)."""

    jobs: int
    rejected_reasons: list[str]
    never_started: int
    queued_submits: Sequence[float]
    run_time: Sequence[float]
    start: Sequence[float | None]
    end: Sequence[float | None]
    wait: Sequence[float | None]
    slots: Sequence[int]
    queued_procs: Sequence[int] = ()
    pending: int = 0
    unreplayed: int = 0

    @classmethod
    def of(cls, outcomes: Iterable[JobOutcome]) -> OutcomeColumns:
        """The columns of ``outcomes``: from the arrays of an :class:`OutcomeTable`,
        else from the objects' fields. Pure."""
        if isinstance(outcomes, OutcomeTable):
            return outcomes.columns()
        items = list(outcomes)
        started = [o for o in items if o.status == "started"]
        queued = [o for o in items if o.status not in ("rejected", "unreplayed")]
        return cls(
            jobs=len(items),
            rejected_reasons=[o.reason for o in items if o.status == "rejected"],
            never_started=sum(1 for o in items if o.status == "never_started"),
            queued_submits=[o.submit for o in queued],
            queued_procs=[o.procs for o in queued],
            pending=sum(1 for o in items if o.status == "pending"),
            unreplayed=sum(1 for o in items if o.status == "unreplayed"),
            run_time=[o.run_time for o in started],
            start=[o.start for o in started],
            end=[o.end for o in started],
            wait=[o.wait for o in started],
            slots=[o.slots for o in started],
        )


@dataclass(frozen=True, slots=True)
class OutcomeArrays:
    """An :class:`OutcomeTable`'s own per-job arrays, in trace order, for writers
    that go through every job (not copies: read them, never change them).
    ``status`` holds indexes into :data:`STATUS_NAMES`; ``start`` is NaN for a
    job that did not start; ``reasons`` and ``details`` are by job index, for
    the jobs that have one. Where started jobs ran, when kept: job ``i`` holds
    runs ``run_first[i]`` to ``run_first[i] + run_count[i] - 1``; run ``r`` is
    hosts ``host_names[run_host[r]]`` onwards, ``run_length[r]`` of them, with
    ``run_slots[r]`` slots each."""

    ids: Sequence[str]
    users: Sequence[str]
    queues: Sequence[str]
    procs: Sequence[int]
    status: bytes | bytearray
    submit: Sequence[float]
    start: Sequence[float]
    run_time: Sequence[float]
    reasons: Mapping[int, str]
    details: Mapping[int, str]
    never_reason: str
    run_first: Sequence[int]
    run_count: Sequence[int]
    run_host: Sequence[int]
    run_length: Sequence[int]
    run_slots: Sequence[int]
    host_names: Sequence[str]


@final
class SeriesRecorder:
    """A replay's time series as it goes (see
    :func:`~xce_core.sim.timeseries_columns`): the replay gives it, after each
    instant once a job was accepted, the instant's totals (used slots, running
    jobs, queue length, queued slot demand); it keeps a row wherever they
    moved. Rows are recorded by the replay's own counters, so they equal what
    :func:`~xce_core.sim.timeseries_columns` computes from the outcomes (a
    property test holds the two together); recording costs a tuple per instant,
    where computing them afterwards costs several passes over every job (most
    of writing ``--timeseries``, benchmarks/bench_outputs.py)."""

    __slots__ = ("_last", "rows", "times")

    def __init__(self) -> None:
        self.times: list[float] = []
        self.rows: list[tuple[int, int, int, int]] = []
        self._last: tuple[int, int, int, int] | None = None

    def instant(self, t: float, totals: tuple[int, int, int, int]) -> None:
        """The totals after instant ``t`` (later than any before)."""
        if totals != self._last:
            self._last = totals
            self.times.append(t)
            self.rows.append(totals)


@final
class OutcomeTable(Sequence[JobOutcome]):
    """Every job's outcome of one replay, in trace order, one array per field.

    The replay appends each job (:meth:`append`, status ``never_started``), then
    marks it :meth:`rejected` or :meth:`started` at most once, and gives a job
    that never started the last reason it pended for (:meth:`pended`). A replay
    stopped before its end marks the jobs it submitted and did not start
    :meth:`pending`, and those it never submitted :meth:`unreplayed`. Indexing and
    iteration build a fresh :class:`JobOutcome` per job, equal to what the replay
    would have kept as objects; so does :meth:`columns` for the report, without
    building them. With ``host_names`` (the cluster's hosts in registration order;
    other names are added as met) each started job's hosts are kept; with
    ``None`` they are not, and read as ``[]`` (``slots`` and :meth:`columns` still
    count the slots held). The replay may leave its time series in the table
    (:meth:`keep_series`); changing a job's outcome afterwards drops it. Not
    thread-safe."""

    __slots__ = (
        "_details",
        "_host_index",
        "_host_names",
        "_ids",
        "_in_order",
        "_keep_hosts",
        "_never_reason",
        "_procs",
        "_queues",
        "_reasons",
        "_run_count",
        "_run_first",
        "_run_host",
        "_run_length",
        "_run_slots",
        "_run_time",
        "_series",
        "_slots",
        "_start",
        "_status",
        "_submit",
        "_unpacked",
        "_unpacked_hosts",
        "_users",
    )

    def __init__(self, host_names: Iterable[str] | None = None) -> None:
        self._ids: list[str] = []
        self._submit = array("d")
        self._run_time = array("d")
        self._procs = array("q")
        self._status = bytearray()
        self._start = array("d")  # nan until started
        self._slots = array("q")
        self._reasons: dict[int, str] = {}
        self._details: dict[int, str] = {}
        self._users: list[str] = []
        self._queues: list[str] = []
        self._never_reason = ""
        self._keep_hosts = host_names is not None
        self._host_names: list[str] = list(host_names or ())
        self._host_index = {name: i for i, name in enumerate(self._host_names)}
        # A job's hosts are its _run_count[job] runs from _run_first[job]; run r
        # is hosts _run_host[r] to _run_host[r] + _run_length[r] - 1, with
        # _run_slots[r] slots each.
        self._run_first = array("q")
        self._run_count = array("q")
        self._run_host = array("q")
        self._run_length = array("q")
        self._run_slots = array("q")
        # By slot count: every host (in table order) as a HostSlots of that many
        # slots, for the usual allocation's test (_pack). Built when first
        # needed, for a few slot counts at most.
        self._in_order: dict[int, list[HostSlots]] = {}
        # Started jobs' allocations not made runs yet: (job, hosts), and how
        # many hosts they name (see _pack).
        self._unpacked: list[tuple[int, Sequence[HostSlots]]] = []
        self._unpacked_hosts = 0
        self._series: SeriesRecorder | None = None

    @property
    def keeps_hosts(self) -> bool:
        """Whether started jobs' hosts are kept (else they read as ``[]``)."""
        return self._keep_hosts

    def append(
        self,
        job_id: str,
        submit: float,
        run_time: float,
        procs: int,
        user: str = "",
        queue: str = "",
    ) -> int:
        """Add a job, ``never_started`` for now; returns its index."""
        self._series = None
        index = len(self._ids)
        self._ids.append(job_id)
        self._users.append(user)
        self._queues.append(queue)
        self._submit.append(submit)
        self._run_time.append(run_time)
        self._procs.append(procs)
        self._status.append(_NEVER_STARTED)
        self._start.append(math.nan)
        self._slots.append(0)
        self._run_first.append(0)
        self._run_count.append(0)
        return index

    def submitter(self, index: int) -> tuple[str, str]:
        """Job ``index``'s user and queue names, as the replay gave them."""
        return self._users[index], self._queues[index]

    def job_id(self, index: int) -> str:
        """The id of job ``index``."""
        return self._ids[index]

    def rejected(self, index: int, reason: str) -> None:
        """Job ``index`` is rejected, for ``reason``."""
        self._series = None
        self._status[index] = _REJECTED
        self._reasons[index] = reason

    def started(self, index: int, start: float, slots: int, hosts: Sequence[HostSlots]) -> None:
        """Job ``index`` started at ``start`` holding ``slots`` slots on ``hosts``
        (kept only when the table keeps hosts)."""
        self._series = None
        self._status[index] = _STARTED
        self._start[index] = start
        self._slots[index] = slots
        if self._keep_hosts and hosts:
            # Made runs later, many jobs at a time (_pack): in a loop of its
            # own, away from the replay's work, it takes half the time
            # (benchmarks/bench_outputs.py).
            self._unpacked.append((index, hosts))
            self._unpacked_hosts += len(hosts)
            if self._unpacked_hosts >= _PACK_AT:
                self._pack()

    def _pack(self) -> None:
        """Every allocation not made runs yet, made runs (in the order given)."""
        unpacked, self._unpacked, self._unpacked_hosts = self._unpacked, [], 0
        run_first, run_count = self._run_first, self._run_count
        # The new runs in lists, added to the arrays at the end (an array's
        # append parses its argument the slow way, a list's does not).
        base = len(self._run_host)
        starts: list[int] = []
        lengths: list[int] = []
        slots_each: list[int] = []
        host_index = self._host_index
        in_orders: dict[int, list[HostSlots] | None] = {}
        for index, hosts in unpacked:
            # The usual case inline (a call per job was most of packing on the
            # NASA replay, benchmarks/bench_outputs.py): one run of equal slots
            # on consecutive hosts, told by comparing the allocation with a
            # slice of the table's hosts as HostSlots (one C loop).
            head = hosts[0]
            first = host_index.get(head.host)
            slots = head.slots
            in_order = in_orders.get(slots, _UNSEEN)
            if in_order is _UNSEEN:
                in_order = in_orders[slots] = self._hosts_in_order(slots)
            run_first[index] = base + len(starts)
            count = len(hosts)
            if (
                first is not None
                and in_order is not None
                and in_order[first : first + count] == hosts
            ):
                if in_order[first] is not head:
                    # Keep the allocation's own (equal) objects: the core lists
                    # a one-slot host by one shared object, so the next
                    # comparison of these hosts compares pointers, not structs.
                    in_order[first : first + count] = hosts
                run_count[index] = 1
                starts.append(first)
                lengths.append(count)
                slots_each.append(slots)
                continue
            runs = self._runs(hosts)
            run_count[index] = len(runs[0])
            starts += runs[0]
            lengths += runs[1]
            slots_each += runs[2]
            in_orders.clear()  # hosts new to the table may have been added
        self._run_host.extend(starts)
        self._run_length.extend(lengths)
        self._run_slots.extend(slots_each)

    def keep_series(self, series: SeriesRecorder) -> None:
        """Keep the time series the replay recorded of these outcomes, as they
        stand now (the replay's last step)."""
        self._series = series

    def recorded_series(self) -> SeriesRecorder | None:
        """The time series the replay kept (:meth:`keep_series`), unless an
        outcome changed since; else ``None``."""
        return self._series

    def started_jobs(self) -> Iterator[tuple[int, float, float, float, int]]:
        """``(index, submit, start, run_time, slots)`` of every started job, in
        trace order."""
        status, submit, start = self._status, self._submit, self._start
        run_time, slots = self._run_time, self._slots
        for index in range(len(status)):
            if status[index] == _STARTED:
                yield index, submit[index], start[index], run_time[index], slots[index]

    def set_never_started_reason(self, reason: str) -> None:
        """The reason every job still ``never_started`` without a reason of its own
        (:meth:`pended`) reads with."""
        self._never_reason = reason

    def pended(self, index: int, reason: str, detail: str) -> None:
        """Job ``index``, not started, last pended for ``reason`` (a category) with
        ``detail``."""
        self._reasons[index] = reason
        self._details[index] = detail

    def pending(self, index: int) -> None:
        """Job ``index`` was submitted and had not started when the replay stopped."""
        self._series = None
        self._status[index] = _PENDING

    def unreplayed(self, index: int) -> None:
        """Job ``index`` was not submitted yet when the replay stopped."""
        self._series = None
        self._status[index] = _UNREPLAYED

    def status(self, index: int) -> Status:
        """The status of job ``index``."""
        return STATUS_NAMES[self._status[index]]

    def arrays(self) -> OutcomeArrays:
        """The table's arrays (see :class:`OutcomeArrays`)."""
        if self._unpacked:
            self._pack()
        return OutcomeArrays(
            ids=self._ids,
            users=self._users,
            queues=self._queues,
            procs=self._procs,
            status=self._status,
            submit=self._submit,
            start=self._start,
            run_time=self._run_time,
            reasons=self._reasons,
            details=self._details,
            never_reason=self._never_reason,
            run_first=self._run_first,
            run_count=self._run_count,
            run_host=self._run_host,
            run_length=self._run_length,
            run_slots=self._run_slots,
            host_names=self._host_names,
        )

    def hosts(self, index: int) -> list[tuple[str, int]]:
        """Where job ``index`` ran, as ``(host, slots)`` pairs (``[]`` when it did
        not start or hosts are not kept)."""
        return self._hosts(index)

    def _runs(self, hosts: Sequence[HostSlots]) -> tuple[list[int], list[int], list[int]]:
        """The runs of an allocation that is not one run of hosts in table order
        (that case is :meth:`_pack`'s): their first hosts, lengths and slots."""
        index = self._host_index
        count = len(hosts)
        # Comprehensions: faster than map(attrgetter(...)) on these structs.
        names = [h.host for h in hosts]
        slots = [h.slots for h in hosts]
        try:
            numbers = list(map(index.__getitem__, names))
        except KeyError:  # a host the cluster did not list: numbered as met
            for name in names:
                if name not in index:
                    index[name] = len(self._host_names)
                    self._host_names.append(name)
            numbers = list(map(index.__getitem__, names))
        if slots.count(slots[0]) == count:
            # Equal slots (on scattered hosts: a fragmented cluster; or on hosts
            # new to the table): the breaks between runs are where consecutive
            # numbers do not differ by one.
            steps = map(operator.sub, numbers[1:], numbers)
            bounds = [0, *compress(itertools.count(1), map((1).__ne__, steps)), count]
            lengths = list(map(operator.sub, bounds[1:], bounds))
            return [numbers[k] for k in bounds[:-1]], lengths, [slots[0]] * len(lengths)
        starts, lengths, slots_each = [numbers[0]], [1], [slots[0]]
        for number, n in zip(numbers[1:], slots[1:], strict=True):
            if number == starts[-1] + lengths[-1] and n == slots_each[-1]:
                lengths[-1] += 1
            else:
                starts.append(number)
                lengths.append(1)
                slots_each.append(n)
        return starts, lengths, slots_each

    def _hosts_in_order(self, slots: int) -> list[HostSlots] | None:
        """Every host of the table, in order, as a :class:`HostSlots` of ``slots``
        slots (``None`` past the first few slot counts: the general path then)."""
        in_order = self._in_order.get(slots)
        if in_order is None or len(in_order) < len(self._host_names):
            if in_order is None and len(self._in_order) >= _IN_ORDER_SLOT_COUNTS:
                return None
            in_order = self._in_order[slots] = [
                HostSlots(host=name, slots=slots) for name in self._host_names
            ]
        return in_order

    def _hosts(self, index: int) -> list[tuple[str, int]]:
        if self._unpacked:
            self._pack()
        first = self._run_first[index]
        end = first + self._run_count[index]
        names = self._host_names
        hosts: list[tuple[str, int]] = []
        for run in range(first, end):
            host, slots = self._run_host[run], self._run_slots[run]
            hosts.extend((names[h], slots) for h in range(host, host + self._run_length[run]))
        return hosts

    def _outcome(self, index: int) -> JobOutcome:
        status = self._status[index]
        submit, run_time = self._submit[index], self._run_time[index]
        outcome = JobOutcome(
            job_id=self._ids[index],
            submit=submit,
            run_time=run_time,
            procs=self._procs[index],
            status=STATUS_NAMES[status],
            reason=self._reasons.get(index, self._never_reason if status == 0 else ""),
            detail=self._details.get(index, ""),
            user=self._users[index],
            queue=self._queues[index],
        )
        if status == _STARTED:
            start = self._start[index]
            outcome.start = start
            outcome.end = start + run_time
            outcome.wait = start - submit
            outcome.hosts = self._hosts(index)
        return outcome

    def __len__(self) -> int:
        return len(self._ids)

    @overload
    def __getitem__(self, index: int) -> JobOutcome: ...
    @overload
    def __getitem__(self, index: slice) -> list[JobOutcome]: ...
    def __getitem__(self, index: int | slice) -> JobOutcome | list[JobOutcome]:
        if isinstance(index, slice):
            return [self._outcome(i) for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("outcome index out of range")
        return self._outcome(index)

    def __iter__(self) -> Iterator[JobOutcome]:
        return map(self._outcome, range(len(self)))

    def __eq__(self, other: object) -> bool:
        """Equal to a table or a list holding equal outcomes in the same order."""
        if not isinstance(other, OutcomeTable | list):
            return NotImplemented
        return len(self) == len(other) and all(map(operator.eq, self, other))

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value

    def __repr__(self) -> str:
        # Kept short: asyncio formats a finished task's result in messages.
        return f"<OutcomeTable of {len(self)} jobs>"

    def columns(self) -> OutcomeColumns:
        """The columns of the report (see :class:`OutcomeColumns`), read from the
        arrays: the same values the outcome objects would give."""
        status = self._status
        started = [s == _STARTED for s in status]
        start = list(compress(self._start, started))
        submit = list(compress(self._submit, started))
        run_time = list(compress(self._run_time, started))
        queued = [s != _REJECTED and s != _UNREPLAYED for s in status]
        return OutcomeColumns(
            jobs=len(self),
            rejected_reasons=[self._reasons[i] for i, s in enumerate(status) if s == _REJECTED],
            never_started=status.count(_NEVER_STARTED),
            queued_submits=list(compress(self._submit, queued)),
            queued_procs=list(compress(self._procs, queued)),
            pending=status.count(_PENDING),
            unreplayed=status.count(_UNREPLAYED),
            run_time=run_time,
            start=start,
            end=[s + r for s, r in zip(start, run_time, strict=True)],
            wait=[s - b for s, b in zip(start, submit, strict=True)],
            slots=list(compress(self._slots, started)),
        )
