"""What the extension app and the handlers both name: the URL namespace, the settings key
of the server's MemoryHost, and the page bound. Imports nothing, so neither side imports
the other for it."""

NAMESPACE = "nbmemory"
# web_app.settings key of the MemoryHost (``settings["nbmemory"]`` is the ExtensionApp itself).
HOST_KEY = "nbmemory_host"
# The most notes, hits or stale entries one request reads at a time.
MAX_PAGE = 500
# The longest recall query, in characters: the query travels in the URL, and tornado drops
# a request line over 64 KB without a reply (4,000 characters percent-encode to 48 KB at most).
MAX_QUERY = 4000
