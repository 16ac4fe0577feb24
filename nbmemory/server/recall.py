"""The recall route: hybrid (keyword + semantic) recall with the panel's filters."""

from __future__ import annotations

from ..errors import InvalidInput
from .handlers import NbMemoryHandler, api
from .shared import MAX_PAGE, MAX_QUERY


class RecallHandler(NbMemoryHandler):
    @api
    async def get(self):
        """Hybrid (keyword + semantic) recall; ``as_of``: the notes as a snapshot sealed them."""
        query = self.arg("query")
        if query is None:
            raise InvalidInput("Give a query: /nbmemory/recall?query=what+unit+is+amount")
        if len(query) > MAX_QUERY:
            raise InvalidInput(f"The query has {len(query):,} characters; recall takes at most "
                               f"{MAX_QUERY:,}. Shorten it to the words that matter.")
        k = self.int_arg("k", 10, low=1, high=MAX_PAGE)
        explain = self.flag("explain", default=False)
        options = dict(tags=self.arg("tags"), kind=self.arg("kind"),
                       priority=self.arg("priority"), since=self.time_arg("since"),
                       until=self.time_arg("until"), min_score=self.float_arg("min_score"),
                       stale=self.stale_arg(), author=self.author_arg(),
                       as_of=self.arg("as_of"))
        hits = await self.call(lambda m: m.recall(query, k=k, explain=explain, **options),
                               "recall")
        self.reply(self.hits(hits))
