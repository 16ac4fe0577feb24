"""Fusion of the lexical and dense channels (numbers only; eval/ measures the ranking)."""

import numpy as np
import pytest

from nbmemory.ranking import LEXICAL_FLOOR, fuse, keyword_evidence


def test_a_note_found_by_meaning_alone_keeps_its_cosine():
    dense = np.array([0.0, 0.31, 0.8])
    assert np.allclose(fuse(np.zeros(3), dense), dense)


def test_partial_keyword_overlap_below_the_floor_changes_nothing():
    dense = np.array([0.4, 0.4])
    lexical = np.array([0.0, LEXICAL_FLOOR - 0.01])
    fused = fuse(lexical, dense)
    assert fused[0] == pytest.approx(fused[1])


def test_a_full_keyword_match_lifts_a_note_toward_one_but_cosine_still_orders_ties():
    fused = fuse(np.array([1.0, 1.0, 0.0]), np.array([0.1, 0.5, 0.9]))
    assert fused[0] > 0.85 and fused[1] > fused[0]
    assert fused[0] <= 1.0 and fused[1] <= 1.0


def test_keyword_evidence_grows_with_the_matched_share_above_the_floor():
    evidence = keyword_evidence(np.array([0.0, LEXICAL_FLOOR, 0.75, 1.0, 1.2]))
    assert list(evidence[:2]) == [0.0, 0.0]
    assert 0.0 < evidence[2] < evidence[3] == 1.0 == evidence[4]


def test_negative_cosines_do_not_go_below_zero():
    assert fuse(np.array([0.0]), np.array([-0.3]))[0] == 0.0
