"""The engine: one process's view of a store (see :mod:`.core` for the map of its parts)."""

from .core import Engine
from .indexes import CARDS_FILENAME, KEYWORDS_FILENAME, VECTOR_FILENAME
from .recall import PRIORITY_BONUS
from .validate import (MAX_NOTE_CHARS, check_kind, check_priority, check_text, content_hash,
                       default_author, filters_for, normalise_tags)
from .writes import BULK_CHUNK
from ..events import INDEXED

__all__ = ["BULK_CHUNK", "CARDS_FILENAME", "INDEXED", "MAX_NOTE_CHARS", "PRIORITY_BONUS", "KEYWORDS_FILENAME", "VECTOR_FILENAME",
           "Engine", "check_kind", "check_priority", "check_text", "content_hash",
           "default_author", "filters_for", "normalise_tags"]
