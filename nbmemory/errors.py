"""Errors raised by nbmemory. Every message says what to do next.

Front ends translate once: magics raise ``UsageError``, the server maps the class
to an HTTP status, the CLI prints the message and exits non-zero.
"""


class NbMemoryError(Exception):
    """Base class for every error nbmemory raises on purpose."""


class InvalidInput(NbMemoryError):
    """The caller passed something the store cannot accept (empty note, bad kind...)."""


class NotFound(NbMemoryError):
    """A note, snapshot or other named thing does not exist."""


class Conflict(NbMemoryError):
    """The request clashes with the store's state (duplicate name, revoked note...)."""


class StoreUnavailable(NbMemoryError):
    """The store cannot be opened or used right now."""


class StoreLocked(StoreUnavailable):
    """Another process owns the store."""

    def __init__(self, message: str, pid: int | None = None):
        super().__init__(message)
        self.pid = pid


class StoreTooNew(StoreUnavailable):
    """The store was written by a newer nbmemory and is left untouched."""


class ModelUnavailable(NbMemoryError):
    """The embedding model cannot be loaded."""


class EmbedderMismatch(Conflict):
    """The store's vectors were made by another model than the configured one."""
