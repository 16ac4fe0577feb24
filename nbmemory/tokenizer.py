"""Text to keyword-index terms: lower-cased stemmed words, stop words left out, and
identifiers kept whole as well as split (``PyObject_GC_Del``, ``orders.amount``).

Words in any script count (``Umsatz_März``, ``сумма``, ``हिन्दी``: a letter's combining
marks, such as Indic vowel signs, belong to its word), read in Unicode's composed form (an
``é`` typed as e and an accent is ``é``); only English ones are stemmed. Chinese, Japanese
and Korean are written without spaces between words, so a run of their characters gives
its overlapping pairs ("金额单位" -> 金额, 额单, 单位), as Lucene's CJK analyzer does: a
query holding a word holds its pairs.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

STOPWORDS = frozenset(
    """a an and are as at be been but by can could did do does for from had has have he her
    his how i if in into is it its me my no not of on or our she so than that the their them
    then there these they this those to too was we were what when where which while who why
    will with would you your""".split()
)

# An identifier-ish run: words joined by . _ :: / or -, e.g. orders.amount, PyObject_GC_Del.
# (Text outside ASCII: _patterns(), with letters' combining marks.)
_TOKEN = re.compile(r"[A-Za-z0-9]+(?:(?:::|[._/\-])[A-Za-z0-9]+)*")
_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
# Characters of scripts written without spaces between words: Han, kana, Hangul.
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
                  r"\U00020000-\U0002ffff]+")
# Separators between the levels of a qualified name (module.attr, dir/file, ns::name).
_QUALIFIER = re.compile(r"::|[./]")

# Bump when tokenize() changes what it makes of a text: a file of an older tokenizer is
# rebuilt, not trusted.
TOKENIZER = 2


@lru_cache(maxsize=1)
def _stemmer():
    """The English stemmer, loaded on first use: the server extension imports this module
    (anchors.file_terms) where the engine's dependencies may not be installed."""
    try:
        import Stemmer

        return Stemmer.Stemmer("english").stemWord
    except ImportError:  # pragma: no cover - PyStemmer is a declared dependency
        import snowballstemmer

        return snowballstemmer.stemmer("english").stemWord


@lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    return _stemmer()(word)


@lru_cache(maxsize=1)
def _patterns() -> tuple[re.Pattern, re.Pattern]:
    """The token and word patterns for text outside ASCII. A letter is ``\\w`` but ``_``,
    or a combining mark (which ``\\w`` leaves out, splitting हिन्दी into ह, न, द); the
    marks' ranges are read from this Python's Unicode tables once (about 30 ms)."""
    marks, start = [], None
    for code in range(0x300, 0x10000):
        mark = unicodedata.category(chr(code))[0] == "M"
        if mark and start is None:
            start = code
        elif not mark and start is not None:
            marks.append(f"\\u{start:04x}-\\u{code - 1:04x}")
            start = None
    letter = rf"(?:[^\W_]|[{''.join(marks)}])"
    word = rf"(?:[^\W\d_]|[{''.join(marks)}])+|\d+"  # letters (CJK runs paired later), digits
    return re.compile(rf"{letter}+(?:(?:::|[._/\-]){letter}+)*"), re.compile(word)


def is_term(text: str) -> bool:
    """Is ``text`` one whole token (a compound identifier or path as the index keeps it)?"""
    if text.isascii():
        return _TOKEN.fullmatch(text) is not None
    return _patterns()[0].fullmatch(unicodedata.normalize("NFC", text)) is not None


def _cjk_pairs(run: str) -> list[str]:
    return [run] if len(run) < 2 else [run[i:i + 2] for i in range(len(run) - 1)]


def _parts(token: str) -> list[str]:
    """The words of a token outside ASCII: split at case changes, CJK runs paired."""
    parts: list[str] = []
    for word in _patterns()[1].findall(token):
        at = 0
        for cjk in _CJK.finditer(word):
            parts += _split_case(word[at:cjk.start()]) + _cjk_pairs(cjk.group())
            at = cjk.end()
        parts += _split_case(word[at:])
    return parts


def _split_case(word: str) -> list[str]:
    if word.isascii():
        return _PART.findall(word)
    cuts = [0] + [i for i in range(1, len(word)) if word[i - 1].islower() and word[i].isupper()]
    return [word[a:b] for a, b in zip(cuts, cuts[1:] + [len(word)])]


def tokenize(text: str) -> list[str]:
    """Lower-cased stemmed words, plus each compound identifier whole.

    A qualified name also yields its compound segments, so ``flights.dep_time`` and
    ``requests.exceptions.RetryError`` match queries for ``dep_time`` and ``RetryError``.
    """
    out: list[str] = []
    tokens = _TOKEN
    if not text.isascii():
        text, tokens = unicodedata.normalize("NFC", text), _patterns()[0]
    for match in tokens.finditer(text):
        token = match.group()
        plain = token.isascii()  # nearly every token: the fast path
        split = _PART.findall if plain else _parts
        parts = split(token)
        if len(parts) > 1 and (plain or not _CJK.fullmatch(token)):  # not a CJK sentence
            out.append(token.lower())
            segments = _QUALIFIER.split(token)
            if len(segments) > 1:
                out.extend(s.lower() for s in segments if len(split(s)) > 1)
        for part in parts:
            word = part.lower()
            if word not in STOPWORDS:
                out.append(_stem(word) if plain or word.isascii() else word)
    return out
