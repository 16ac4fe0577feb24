"""What every part of the engine shares: the engine that coordinates them."""

from __future__ import annotations

from typing import Callable

Progress = Callable[[int, int], None]


class Part:
    """A cohesive piece of the engine (writes, reads, staleness, snapshots, upkeep); it
    reaches the store, the lock and the projections through the engine."""

    def __init__(self, engine):
        self.engine = engine

    @property
    def store(self):
        return self.engine.store

    @property
    def lock(self):
        return self.engine.lock
