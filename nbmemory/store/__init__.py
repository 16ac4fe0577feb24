"""The store: DuckDB for one user (the default). See :mod:`.duckdb`."""

from . import schema
from .duckdb import Store
from .filters import Filters
from .schema import COMPACT_FILENAME, DB_FILENAME, MIGRATIONS, SCHEMA_VERSION

__all__ = ["COMPACT_FILENAME", "DB_FILENAME", "MIGRATIONS", "SCHEMA_VERSION", "Filters",
           "Store", "schema"]
