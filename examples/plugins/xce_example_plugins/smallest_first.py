"""``smallest_first``: the job asking for the fewest tasks goes first.

Narrow jobs fill the gaps wide ones leave, so short interactive or test jobs do
not wait behind a 512-task run. The price is that wide jobs can wait a long
time on a busy cluster; pair it with a queue of its own
(``queue_config`` with ``picker: "smallest_first"``) rather than making it the
default for everything.
"""

from __future__ import annotations

from typing import Any

from xce_core.plugin import Job, Picker, Queue

__all__ = ["SmallestFirstPicker"]


class SmallestFirstPicker(Picker):
    """Fewest ``max_tasks`` first, then earliest submit time, then arrival order.

    The key depends on the job alone (the core computes it once, at submission),
    and ``job.seq`` makes it total, as the :class:`~xce_core.Picker` contract asks.
    Job priority is deliberately ignored: size is the whole policy here.
    """

    name = "smallest_first"

    def order_key(self, job: Job, queue: Queue) -> tuple[Any, ...]:
        return (job.max_tasks, job.submit_time, job.seq)
