"""The MTP head's full-distribution loss terms (tools.training.mtp_train.dist_loss, loss._full_terms).

Hand-built top-k rows with exact expected values; mutants (no rest bucket, renormalised
top-k, the drafter's q at the wrong temperature) must miss them."""

from __future__ import annotations

import math

import pytest
import torch

from tools.training.mtp_train.dist_loss import kl_topk_rest, parse_loss, tv_topk
from tools.training.mtp_train.loss import _full_terms


def test_parse_loss_reads_names_and_weights():
    assert parse_loss("kl-topk:1,tv:0.5,ce") == {"kl-topk": 1.0, "tv": 0.5, "ce": 1.0}
    assert parse_loss("kl,ce") == {"kl": 1.0, "ce": 1.0}
    for bad in ("kl-top", "tv,tv", "tv:-1", "tv:x", ""):
        with pytest.raises(ValueError):
            parse_loss(bad)


# p = [0.5, 0.3] and rest 0.2; q = [0.25, 0.25] and rest 0.5
P = torch.tensor([[0.5, 0.3]])
Q = torch.tensor([[0.25, 0.25]])
BOTH = torch.tensor([[True, True]])
FIRST = torch.tensor([[True, False]])  # the second top-k token is not a candidate


def test_kl_topk_with_rest_bucket_exact():
    kl = kl_topk_rest(P, Q.log(), BOTH)
    want = 0.5 * math.log(0.5 / 0.25) + 0.3 * math.log(0.3 / 0.25) + 0.2 * math.log(0.2 / 0.5)  # 0.218012
    assert float(kl) == pytest.approx(want, abs=1e-6)
    # the token the drafter cannot draft joins the rest: buckets {0.5 | 0.25}, rest {0.5 | 0.75}
    kl1 = kl_topk_rest(P, Q.log(), FIRST)
    want1 = 0.5 * math.log(2.0) + 0.5 * math.log(0.5 / 0.75)  # 0.143841
    assert float(kl1) == pytest.approx(want1, abs=1e-6)
    # zero when q matches p on every bucket, whatever the rest's split inside
    assert float(kl_topk_rest(P, P.log(), BOTH)) == pytest.approx(0.0, abs=1e-7)
    # mutants: without the rest bucket, or with p renormalised over the top-k (the older 'kl')
    no_rest = float((P * (P / Q).log()).sum())  # 0.401270
    pn = P / P.sum()
    renorm = float((pn * (pn / Q).log()).sum())  # 0.444
    for mutant in (no_rest, renorm):
        assert abs(mutant - want) > 1e-2


def test_tv_topk_exact():
    assert float(tv_topk(P, Q, BOTH)) == pytest.approx(0.5, abs=1e-7)
    assert float(tv_topk(P, Q, FIRST)) == pytest.approx(0.75, abs=1e-7)
    q = torch.tensor([[0.6, 0.1]])
    assert float(tv_topk(P, q, BOTH)) == pytest.approx(1 - 0.5 - 0.1, abs=1e-7)
    # mutant: max instead of min (1 - 0.6 - 0.3 = 0.1)
    assert abs(float(1 - (torch.maximum(P, q)).sum()) - 0.4) > 1e-2


def test_full_terms_compare_at_the_temperature_with_the_drafters_softmax_at_that_temperature():
    """One position, a 3-entry table with logits ln 4, ln 2, 0: at T = 0.5 the drafter's
    q = [16, 4, 1] / 21; the target's top-2 at T = 0.5 are [0.7, 0.2] (rest 0.1)."""
    logits = torch.tensor([[[math.log(4.0), math.log(2.0), 0.0]]])  # [B=1, T=1, 3]
    logq = torch.log_softmax(logits, -1)
    cidx = torch.tensor([[[1, 0]]])  # the target's top-2 are table entries 1 and 0
    inc = torch.tensor([[[True, True]]])
    valid = torch.tensor([[True]])
    batch = {"tp": torch.tensor([[[0.6, 0.3]]]), "tp_at": {0.5: torch.tensor([[[0.7, 0.2]]])}}
    q = [4 / 21, 16 / 21]  # q at T = 0.5 of entries 1 and 0
    tv = _full_terms(logits, logq, cidx, inc, valid, batch, 1, {"tv": 1.0}, (0.5,))
    assert float(tv) == pytest.approx(1 - min(0.7, q[0]) - min(0.2, q[1]), abs=1e-6)  # 1 - 4/21 - 0.2
    kl = _full_terms(logits, logq, cidx, inc, valid, batch, 1, {"kl-topk": 1.0}, (0.5,))
    rest_q = 1 / 21
    want = 0.7 * math.log(0.7 / q[0]) + 0.2 * math.log(0.2 / q[1]) + 0.1 * math.log(0.1 / rest_q)
    assert float(kl) == pytest.approx(want, abs=1e-5)
    # mutant: the drafter's q at T = 1 ([4, 2, 1] / 7) against the T = 0.5 target
    assert abs((1 - min(0.7, 2 / 7) - min(0.2, 4 / 7)) - float(tv)) > 1e-2
    # two temperatures: the mean of the two; T = 1 reads batch["tp"] and the plain log-softmax
    both = _full_terms(logits, logq, cidx, inc, valid, batch, 1, {"tv": 1.0}, (1.0, 0.5))
    at1 = 1 - min(0.6, 2 / 7) - min(0.3, 4 / 7)
    assert float(both) == pytest.approx((at1 + float(tv)) / 2, abs=1e-6)
    # weights multiply; a position that is not valid counts nowhere
    w = _full_terms(logits, logq, cidx, inc, valid, batch, 1, {"tv": 2.0}, (0.5,))
    assert float(w) == pytest.approx(2 * float(tv), abs=1e-6)
    none = _full_terms(logits, logq, cidx, inc, ~valid, batch, 1, {"tv": 1.0}, (0.5,))
    assert float(none) == 0.0
