"""The engine's tests again, on a team store: every test below that takes the ``memory``
fixture runs here against PostgreSQL (tests/postgres.py) instead of DuckDB."""

import inspect

import pytest

from nbmemory.embed import HashEmbedder
from nbmemory.memory import Memory

from test_engine import *  # noqa: F401,F403
from test_history import *  # noqa: F401,F403
from test_questions import *  # noqa: F401,F403
from test_stale import *  # noqa: F401,F403
from test_checks import *  # noqa: F401,F403
from test_exchange import *  # noqa: F401,F403
from test_browse import *  # noqa: F401,F403

# These read the DuckDB file itself; test_team checks the same of PostgreSQL's tables.
del test_purge_erases_text_and_vectors_but_keeps_the_fact  # noqa: F821
del test_purge_leaves_the_text_nowhere_in_the_store_or_a_later_export  # noqa: F821

# Tests that make stores of their own would only run on DuckDB twice.
for _name, _test in list(globals().items()):
    if _name.startswith("test_") and not {"memory", "engine"} & set(
            inspect.signature(_test).parameters):
        del globals()[_name]


@pytest.fixture
def memory(team_url):
    with Memory.open(team_url, embedder=HashEmbedder()) as mem:
        yield mem
