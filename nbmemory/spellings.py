"""One spelling for English words written two ways, before they are stemmed: British
spellings as American (``normalise`` is ``normalize``, ``colour`` ``color``, ``centre``
``center``, ``catalogue`` ``catalog``, ``licence`` ``license``) and Greek and Latin plurals
as their singular (``analyses`` is ``analysis``, ``indices`` ``index``, ``axes`` ``axis``).

Queries and notes go through the same rules, so a rule that also catches a word that is not
a variant (``precise`` becomes ``precize``) changes nothing a user sees, unless it then
meets another word: ``expertise`` and ``expert`` become one term, as the stemmer already
makes ``organ`` of ``organize``. ``tests/test_lexical.py`` lists the words each rule must
and must not join.
"""

from __future__ import annotations

import re

# Suffix rules, in order, on a lower-cased ASCII word. -ise after a consonant most -ize
# verbs end in (not advise, revise, raise, noise, cruise); -sis before the stemmer, which
# strips the -ses of a plural; -lyse (analyse, paralyse); -our with three letters before it
# (not four, hour, your, flour); -tre, -bre; -ogue with four letters before it (not rogue).
_RULES = ((re.compile(r"(?<=[a-z]{2}[lrnmtcdgsh])is(e|es|ed|ing|ation|ations|able|er|ers)$"),
           r"iz\1"),
          (re.compile(r"(?<=[a-z]{4})sis$"), "ses"),
          (re.compile(r"(?<=[a-z]l)ys(e|es|ed|ing|er|ers)$"), r"yz\1"),
          (re.compile(r"(?<=[a-z]{3})our(s|ed|ing|ite|ites|able|ably|er|ers|ful|less)?$"),
           r"or\1"),
          (re.compile(r"(?<=[a-z]{2}[tb])re(s)?$"), r"er\1"),
          (re.compile(r"(?<=[a-z]{4})ogue(s)?$"), r"og\1"))

# Words no suffix rule can tell apart from others.
_WORDS = {
    "licence": "license", "licences": "licenses", "defence": "defense",
    "offence": "offense", "offences": "offenses", "pretence": "pretense",
    "grey": "gray", "greys": "grays", "aluminium": "aluminum", "programme": "program",
    "programmes": "programs", "judgement": "judgment", "judgements": "judgments",
    "acknowledgement": "acknowledgment", "ageing": "aging", "enrolment": "enrollment",
    "fulfil": "fulfill", "skilful": "skillful", "mould": "mold", "moulds": "molds",
    "artefact": "artifact", "artefacts": "artifacts", "sceptical": "skeptical",
    "manoeuvre": "maneuver", "plough": "plow",
    "indices": "index", "matrices": "matrix", "vertices": "vertex", "appendices": "appendix",
    "axes": "axis", "criteria": "criterion", "phenomena": "phenomenon",
    "schemata": "schema", "maxima": "maximum", "minima": "minimum", "optima": "optimum",
    "crises": "crisis", "theses": "thesis", "sceptic": "skeptic", "sceptics": "skeptics",
    "anaemia": "anemia", "practise": "practice", "practised": "practiced",
    "practising": "practicing",
}
# Not variants, though the rules would take them for ones (timber, enter).
_KEPT = frozenset(("timbre", "entre"))


def american(word: str) -> str:
    """``word`` (lower-cased ASCII) in the one spelling its variants share."""
    word = _WORDS.get(word, word)
    if len(word) < 5 or word in _KEPT:
        return word
    for pattern, replacement in _RULES:
        word = pattern.sub(replacement, word)
    return word
