"""What a submission needs that many submissions share, worked out once.

A busy cluster submits hundreds of thousands of jobs in a few dozen requirement
shapes from a few thousand users. :class:`ShapeCache` parses, canonicalises and
fingerprints each distinct requirement text once, checks each of its task ranges
once, and hands every job of one shape the same :class:`JobShape`, and every
job of one submitter the same :data:`Origin` tuple (so 500,000 jobs hold one
copy of each string, not 500,000). A repeat submission costs a few dictionary
lookups.

Everything here is a cache: emptied when full (bounded whatever the input), and
an emptied entry is rebuilt equal, because fingerprints are interned by the
cluster state, which never forgets one.
"""

from __future__ import annotations

from typing import Final, final

from events import JobSubmitted
from xce_core._dispatch import primary_fingerprints
from xce_core._errors import ResReqSyntaxError
from xce_core._model import JobShape, Origin
from xce_core._state import ClusterState, task_problem
from xce_core.resreq import ResReq, parse_resreq

__all__ = ["ShapeCache"]

# Distinct requirement texts, and submitters, held at most (each table is
# emptied when full): hostile input of ever-new texts or users costs a rebuild,
# never unbounded memory.
TEXTS_HELD: Final = 65_536
ORIGINS_HELD: Final = 65_536
# Distinct task ranges held per text (emptied likewise).
RANGES_HELD: Final = 256


@final
class _Text:
    """One requirement text: parsed and canonical, or why it does not parse;
    its shapes (or why the task range is impossible) by task range."""

    __slots__ = ("canonical", "error", "ranges", "resreq", "text")

    def __init__(self, text: str, resreq: ResReq | None, canonical: str, error: str) -> None:
        self.text = text
        self.resreq = resreq
        self.canonical = canonical
        self.error = error
        self.ranges: dict[int | tuple[int, int], JobShape | str] = {}


@final
class ShapeCache:
    """Shapes and origins of submissions to one :class:`ClusterState`.

    Synchronous, no I/O; not thread-safe (the core's owner calls it).
    """

    __slots__ = ("_by_user", "_origins", "_state", "_texts")

    def __init__(self, state: ClusterState) -> None:
        self._state = state
        self._texts: dict[str, _Text] = {}
        self._origins: dict[Origin, Origin] = {}
        # The origin last handed out for each user: usually the one asked for
        # again, found without building and hashing a tuple per job.
        self._by_user: dict[str, Origin] = {}

    def shape(self, ev: JobSubmitted) -> JobShape | str:
        """The shape of ``ev``'s job, or why it must be rejected (the error of its
        ``job_rejected``: the requirement does not parse, or its task counts are
        impossible), exactly as parsing and checking ``ev`` afresh would say.

        Raises what a fault raises (parsing or fingerprinting failing otherwise
        than with :class:`ResReqSyntaxError`); nothing is cached then.
        """
        entry = self._texts.get(ev.resreq)
        if entry is None:
            entry = self._add_text(ev.resreq)
        if entry.resreq is None:
            return entry.error
        # A plain max_tasks (the usual) is its own key: no tuple per job.
        tasks = ev.max_tasks if ev.min_tasks is None else (ev.min_tasks, ev.max_tasks)
        shape = entry.ranges.get(tasks)
        if shape is None:
            shape = self._add_shape(entry, tasks, ev.task_range)
        return shape

    def origin(self, ev: JobSubmitted) -> Origin:
        """``(user, queue, project, priority, run_limit)`` of ``ev``, as the one tuple shared by
        every job submitted with the same (its strings too)."""
        origin = self._by_user.get(ev.user)
        if (
            origin is not None
            and origin[1] == ev.queue
            and origin[2] == ev.project
            and origin[3] == ev.priority
            and origin[4] == ev.run_limit
        ):
            return origin
        key = (ev.user, ev.queue, ev.project, ev.priority, ev.run_limit)
        origin = self._origins.get(key)
        if origin is None:
            if len(self._origins) >= ORIGINS_HELD:
                self._origins.clear()
                self._by_user.clear()
            origin = self._origins[key] = key
        self._by_user[ev.user] = origin
        return origin

    def tables(self) -> tuple[dict[str, _Text], dict[str, Origin]]:
        """The requirement texts held and the origin last handed out for each
        user, for a caller that finds repeats itself (``SchedulerCore._submit``,
        benchmark B5 of benchmarks/bench_ingest.py). What :meth:`shape` would
        return for an event without ``min_tasks``, whose text is held and
        parsed, is ``text.ranges[ev.max_tasks]`` when present; what
        :meth:`origin` would return is the user's origin when its other four
        fields equal the event's. Read only; the tables are emptied in place
        when full, never replaced."""
        return self._texts, self._by_user

    def __len__(self) -> int:
        """Texts held (for tests of the bound)."""
        return len(self._texts)

    def _add_text(self, text: str) -> _Text:
        try:
            resreq: ResReq | None = parse_resreq(text)
        except ResReqSyntaxError as exc:
            entry = _Text(text, None, "", f"bad resreq: {exc}")
        else:
            entry = _Text(text, resreq, str(resreq), "")
        if len(self._texts) >= TEXTS_HELD:
            self._texts.clear()
        self._texts[text] = entry
        return entry

    def _add_shape(
        self, entry: _Text, tasks: int | tuple[int, int], task_range: tuple[int, int]
    ) -> JobShape | str:
        assert entry.resreq is not None
        low, high = task_range
        problem = task_problem(entry.resreq, low, high)
        shape: JobShape | str
        if problem:
            shape = problem
        else:
            fp = self._state.fingerprint(entry.canonical, low, high)
            shape = JobShape(entry.text, entry.resreq, low, high, fp)
            shape.primary_fps = primary_fingerprints(self._state, shape)
        if len(entry.ranges) >= RANGES_HELD:
            entry.ranges.clear()
        entry.ranges[tasks] = shape
        return shape
