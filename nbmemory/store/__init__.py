"""The store: DuckDB for one user (the default, :mod:`.duckdb`), PostgreSQL for a team
(:mod:`.postgres`). :func:`open_store` picks the one a local directory stands for."""

from pathlib import Path

from ..address import linked_address
from ..errors import StoreDamaged
from . import schema
from .duckdb import Store
from .filters import Filters
from .schema import (COMPACT_FILENAME, DB_FILENAME, MIGRATIONS, SCHEMA_VERSION, VECTOR_FILENAME,
                     lost_database)


def open_store(directory: Path) -> Store:
    """The DuckDB store in ``directory``, or the team store its address file names."""
    address = linked_address(directory)
    if address is None:
        if not (directory / DB_FILENAME).exists() and (lost := lost_database(directory, 0)):
            raise StoreDamaged(lost)  # before a new empty database is made over the evidence
        return Store(directory)
    from .postgres import PostgresStore

    return PostgresStore(address)


__all__ = ["COMPACT_FILENAME", "DB_FILENAME", "MIGRATIONS", "SCHEMA_VERSION", "Filters",
           "Store", "open_store", "schema"]
