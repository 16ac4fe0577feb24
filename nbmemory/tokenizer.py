"""Text to keyword-index terms: lower-cased stemmed words, stop words left out, and
identifiers kept whole as well as split (``PyObject_GC_Del``, ``orders.amount``). A word
whose parts only its capitals show is the same word in one case (``orderTotal`` is
``ordertotal``), an acronym's plural its singular (``NULLs``, ``KPIs``), a number its digits
without thousands separators as well (``1,200``); see :func:`_compound` for hyphenated words.

Words in any script count (``Umsatz_März``, ``сумма``, ``हिन्दी``: a letter's combining
marks, such as Indic vowel signs, belong to its word), read in Unicode's compatibility form
(an ``é`` typed as e and an accent is ``é``; full-width ``ＥＵＲ`` is ``EUR``, ``ﬁ`` is
``fi``) and case-folded (``Straße`` is ``strasse``). Latin and Greek letters lose their
accents, as people often type them without (``cafe`` finds ``café``, ``ΠΟΣΟ`` finds
``πόσο``; ``lodz`` finds ``Łódź``, a stroke or a missing dot being read as an accent), as
do Cyrillic stress marks and Hebrew vowel points; characters that show nothing (a soft hyphen,
a zero-width space) are dropped. A word that is then plain ASCII is stemmed as English, in
one spelling of its British and American forms and of a Greek or Latin plural and its
singular (:mod:`.spellings`); Cyrillic, Greek, Arabic and Devanagari words are stemmed by
their script's Snowball stemmer (Russian, Greek, Arabic, Hindi), others not at all. Chinese,
Japanese and Korean are written without spaces between words, so a run of their characters gives its overlapping pairs ("金额单位"
-> 金额, 额单, 单位), as Lucene's CJK analyzer does: a query holding a word holds its pairs.
Code written into such text without spaces (``在acquire_lock之前``) is a token of its own.
A note's text also gives each such character alone, so that a one-character question
(``円``) finds it; a query's longer runs give only their pairs. A Hebrew word in a note also
gives itself without the one or two prefix letters Hebrew joins to words (``באגורות``, in
agorot, gives ``אגורות``). Thai, Lao, Khmer and
Myanmar, also written without spaces, are paired the same way. Each emoji or pictograph is a
term of its own (``🔥``, ``⚠`` with or without its emoji-style selector).
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from .spellings import american

STOPWORDS = frozenset(
    """a an and are as at be been but by can could did do does for from had has have he her
    his how i if in into is it its me my no not of on or our she so than that the their them
    then there these they this those to too was we were what when where which while who why
    will with would you your""".split()
)

# An identifier-ish run: words joined by . _ :: / or -, e.g. orders.amount, PyObject_GC_Del.
# (Text outside ASCII: _patterns(), with letters' combining marks.)
_TOKEN = re.compile(r"[A-Za-z0-9]+(?:(?:::|[._/\-])[A-Za-z0-9]+)*")
# A number written with thousands separators (1,200,000; 3,709.7; 価格1,200円) is also a
# term without them: 1200 finds $1,200. Its groups stay terms too, as 100,250,500 may be a
# list (250 finds it).
_GROUPED = re.compile(r"(?<![\d,])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?!\d|[.,]\d)")
# Its parts: HTTPError is HTTP and Error, but an acronym's plural (NULLs, IDs) is one word.
_PART = re.compile(r"[A-Z]{2,}s(?![a-z])|[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
# Characters of scripts written without spaces between words: Thai, Lao, Myanmar, Khmer,
# kana, Han, Hangul (and their combining marks, which stay with the character they follow).
UNSPACED = (r"[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf"
            r"\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002ffff]")
_CJK = re.compile(UNSPACED + "+")
# Where a CJK character touches another script's letter or digit, with no separator.
_OTHER = rf"(?!{UNSPACED})[^\W_]"
_CJK_EDGE = re.compile(rf"(?<={UNSPACED})(?={_OTHER})|(?<={_OTHER})(?={UNSPACED})")
# Scripts whose words a Snowball stemmer reads, by the range of their letters (folded:
# Greek Extended letters are decomposed to basic Greek ones first).
_SCRIPT_STEMMERS = (("\u0400", "\u04ff", "russian"), ("\u0370", "\u03ff", "greek"),
                    ("\u0600", "\u06ff", "arabic"), ("\u0900", "\u097f", "hindi"))
# Pictographs: emoji and the older symbol blocks they grew from (⚠, ✅, ★), not arrows (a
# → b is punctuation in a note). Skin tones, the joiner and the emoji-style selector are
# not terms: 👍🏽 is 👍, ⚠️ is ⚠.
_PICTOGRAPH = re.compile(r"[\u2300-\u23ff\u2600-\u27bf\u2b00-\u2bff"
                         r"\U0001f000-\U0001f3fa\U0001f400-\U0001faff]")
# Separators between the levels of a qualified name (module.attr, dir/file, ns::name).
_QUALIFIER = re.compile(r"::|[./]")

# Characters that show nothing and are not word breaks to a reader: the soft hyphen and
# zero-width space of text pasted from the web or a PDF, the word joiner, a stray BOM, and
# the variation selectors (⚠️'s emoji style is a mark: alone, it made a term).
_INVISIBLE = dict.fromkeys(map(ord, "\u00ad\u200b\u2060\ufeff\ufe0e\ufe0f"))
# Latin letters with a stroke or without a dot, which Unicode does not decompose into a
# letter and an accent but people type as the plain letter (lodz for Łódź).
_PLAIN_LETTERS = str.maketrans("łŁıđĐøØħĦŧŦ", "lLidDoOhHtT")

# Bump when tokenize() changes what it makes of a text: a file of an older tokenizer is
# rebuilt, not trusted.
TOKENIZER = 6


@lru_cache(maxsize=None)
def _stemmer(language: str = "english"):
    """A Snowball stemmer, loaded on first use: the server extension imports this module
    (mentions.file_terms) where the engine's dependencies may not be installed."""
    try:
        import Stemmer

        return Stemmer.Stemmer(language).stemWord
    except ImportError:  # pragma: no cover - PyStemmer is a declared dependency
        import snowballstemmer

        return snowballstemmer.stemmer(language).stemWord


@lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    return _stemmer()(american(word))


@lru_cache(maxsize=200_000)
def _stem_other(word: str) -> str:
    """A folded word outside ASCII, stemmed by its first letter's script (or kept)."""
    first = word[0]
    for low, high, language in _SCRIPT_STEMMERS:
        if low <= first <= high:
            return _stemmer(language)(word)
    return word


# Hebrew writes "in", "the", "and", "to", "from", "that" and "as" as a letter joined to the
# next word (באגורות: in agorot): a note also gives its words without one or two of them.
_HEBREW_PREFIXES = frozenset("בהוכלמש")


def _unprefixed(word: str) -> list[str]:
    out = []
    while len(out) < 2 and word[0] in _HEBREW_PREFIXES and len(word) > 3:
        word = word[1:]
        out.append(word)
    return out


def _dropped(mark: str, base: str) -> bool:
    """Is ``mark`` (after letter ``base``) an accent people often leave out? Any on a
    Latin or Greek letter; a stress mark on a Cyrillic one (not the breve of й); Hebrew
    vowel points. An Indic vowel sign is a letter's own."""
    code, of = ord(mark), ord(base)
    return (base.isascii() or 0xC0 <= of <= 0x24F or 0x370 <= of <= 0x3FF
            or 0x1E00 <= of <= 0x1FFF or 0x400 <= of <= 0x4FF and code in (0x300, 0x301)
            or 0x591 <= code <= 0x5C7)


def fold(word: str) -> str:
    """A word or whole token as the index keeps it: case-folded, without the accents
    :func:`_dropped` names. Short words are cached (a whole CJK clause is not)."""
    return _fold_word(word) if len(word) <= 64 else _fold(word)


@lru_cache(maxsize=200_000)
def _fold_word(word: str) -> str:
    return _fold(word)


def _fold(word: str) -> str:
    return _unaccented(word.casefold())


def _unaccented(word: str) -> str:
    """``word`` without the accents :func:`_dropped` names, its case kept."""
    if word.isascii():
        return word
    word = word.translate(_PLAIN_LETTERS)
    out, base = [], ""
    for char in unicodedata.normalize("NFD", word):
        if unicodedata.category(char)[0] != "M":
            base = char
        elif base and _dropped(char, base):
            continue
        out.append(char)
    return unicodedata.normalize("NFC", "".join(out))


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
    return _patterns()[0].fullmatch(unicodedata.normalize("NFKC", text)) is not None


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


def _stemmed(word: str) -> str:
    return _stem(word) if word.isascii() else _stem_other(word)


def _compound(token: str, whole, split, document: bool) -> list[str]:
    """The terms a token of several parts gives whole, besides its parts: an identifier or
    path as written, and its compound segments; a word whose parts only its capitals show
    (orderTotal) stemmed, as the same word typed in one case (ordertotal) is; in a note, a
    hyphenated word (time-zone) also closed up, as a question may write it (timezone)."""
    if token.isalnum():
        return [_stemmed(whole(token))]
    out = [whole(token)]
    segments = _QUALIFIER.split(token)
    if len(segments) > 1:
        out.extend(whole(s) for s in segments if len(split(s)) > 1)
    if document and "-" in token and token.replace("-", "").isalpha():
        out.append(_stemmed(whole(token.replace("-", ""))))
    return out


def tokenize(text: str, *, document: bool = False) -> list[str]:
    """Lower-cased stemmed words, plus each compound identifier whole.

    A qualified name also yields its compound segments, so ``flights.dep_time`` and
    ``requests.exceptions.RetryError`` match queries for ``dep_time`` and ``RetryError``.
    A ``document`` (a note's text, not a query) also gives each character of a CJK run.
    """
    out: list[str] = []
    tokens = _TOKEN
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text).translate(_INVISIBLE)
        if not text.isascii():
            tokens = _patterns()[0]
    for match in tokens.finditer(text):
        token = match.group()
        plain = token.isascii()  # nearly every token: the fast path
        if not plain and _CJK_EDGE.search(token):
            # 在acquire_lock之前: Chinese and Japanese write code into their text without
            # spaces; each piece is a token of its own, so the identifier is kept whole.
            for piece in _CJK_EDGE.split(token):
                out.extend(tokenize(piece, document=document))
            continue
        if not plain and (bare := _unaccented(token)).isascii():  # ÉTLJob splits as ETLJob
            token, plain = bare, True
        split = _PART.findall if plain else _parts
        whole = str.lower if plain else fold
        parts = split(token)
        if len(parts) > 1 and (plain or not _CJK.fullmatch(token)):  # not a CJK sentence
            out.extend(_compound(token, whole, split, document))
        for part in parts:
            if plain and part[-1:] == "s" and len(part) > 2 and part[:-1].isupper():
                part = part[:-1]  # KPIs is KPI
            word = whole(part)
            if word not in STOPWORDS:
                out.append(_stemmed(word))
                if document and not plain:
                    out.extend(_unprefixed(word))
        if document and not plain:
            out.extend(c for run in _CJK.findall(token) if len(run) > 1 for c in run
                       if unicodedata.category(c)[0] != "M")
    if "," in text:
        out.extend(number.group().replace(",", "") for number in _GROUPED.finditer(text))
    if tokens is not _TOKEN:
        out.extend(_PICTOGRAPH.findall(text))
    return out
