"""Text to keyword-index terms: lower-cased stemmed words, stop words left out, and
identifiers kept whole as well as split (``PyObject_GC_Del``, ``orders.amount``)."""

from __future__ import annotations

import re
from functools import lru_cache

try:
    import Stemmer

    _stem_words = Stemmer.Stemmer("english").stemWord
except ImportError:  # pragma: no cover - PyStemmer is a declared dependency
    import snowballstemmer

    _stem_words = snowballstemmer.stemmer("english").stemWord

STOPWORDS = frozenset(
    """a an and are as at be been but by can could did do does for from had has have he her
    his how i if in into is it its me my no not of on or our she so than that the their them
    then there these they this those to too was we were what when where which while who why
    will with would you your""".split()
)

# An identifier-ish run: words joined by . _ :: / or -, e.g. orders.amount, PyObject_GC_Del.
_TOKEN = re.compile(r"[A-Za-z0-9]+(?:(?:::|[._/\-])[A-Za-z0-9]+)*")
_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
# Separators between the levels of a qualified name (module.attr, dir/file, ns::name).
_QUALIFIER = re.compile(r"::|[./]")

# Bump when tokenize() changes what it makes of a text: a file of an older tokenizer is
# rebuilt, not trusted.
TOKENIZER = 1


@lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    return _stem_words(word)


def tokenize(text: str) -> list[str]:
    """Lower-cased stemmed words, plus each compound identifier whole.

    A qualified name also yields its compound segments, so ``flights.dep_time`` and
    ``requests.exceptions.RetryError`` match queries for ``dep_time`` and ``RetryError``.
    """
    out: list[str] = []
    for match in _TOKEN.finditer(text):
        token = match.group()
        parts = _PART.findall(token)
        if len(parts) > 1:
            out.append(token.lower())
            segments = _QUALIFIER.split(token)
            if len(segments) > 1:
                out.extend(s.lower() for s in segments if len(_PART.findall(s)) > 1)
        for part in parts:
            word = part.lower()
            if word not in STOPWORDS:
                out.append(_stem(word))
    return out
