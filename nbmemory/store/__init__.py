"""The store: DuckDB for one user (the default, :mod:`.duckdb`), PostgreSQL for a team
(:mod:`.postgres`). :func:`open_store` picks the one a local directory stands for."""

from pathlib import Path

from ..address import linked_address
from . import schema
from .duckdb import Store
from .filters import Filters
from .schema import COMPACT_FILENAME, DB_FILENAME, MIGRATIONS, SCHEMA_VERSION


def open_store(directory: Path) -> Store:
    """The DuckDB store in ``directory``, or the team store its address file names."""
    address = linked_address(directory)
    if address is None:
        return Store(directory)
    from .postgres import PostgresStore

    return PostgresStore(address)


__all__ = ["COMPACT_FILENAME", "DB_FILENAME", "MIGRATIONS", "SCHEMA_VERSION", "Filters",
           "Store", "open_store", "schema"]
