"""Process-wide settings the command-line drivers apply (never the core itself)."""

from __future__ import annotations

import gc

__all__ = ["tune_gc"]


def tune_gc() -> None:
    """Collect the youngest generation less often.

    A scheduler allocates many small objects per decision that live exactly as
    long as their session, and holds large, long-lived state (jobs, workers).
    The default threshold (700) runs a young collection every few decisions;
    50,000 cuts collector time by about a fifth on a trace replay without
    letting garbage pile up (older generations keep their defaults' ratios).
    """
    gc.set_threshold(50_000, 50, 100)
