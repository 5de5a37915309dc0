"""tree_grow: the shape rule, deterministic and sampled children, and why a sampled child
may never be kept for its own value (a mutant that does so must fail)."""

from __future__ import annotations

import pytest
import torch

from playground.decoding import tree_grow
from playground.decoding.tree import ROOT, DraftTree, verify_tree
from tests.stats import assert_does_not_follow, assert_follows

V = 5
# Hand-built distributions on a 5-token vocabulary (rows sum to 1).
P_ROOT = torch.tensor([0.40, 0.25, 0.15, 0.12, 0.08])  # the target at the root
Q_ROOT = torch.tensor([0.10, 0.50, 0.20, 0.15, 0.05])  # the drafter at the root: disagrees on purpose


def test_allocation_is_a_prefix_per_node_and_follows_path_probability():
    probs = torch.tensor(
        [
            [0.7, 0.2, 0.1, 0.0, 0.0],  # a confident node
            [0.3, 0.3, 0.2, 0.1, 0.1],
        ]
    )  # an unsure one
    # slots: node0 0.7, 0.2, 0.1; node1 (score 0.5) 0.15, 0.15, 0.1, ...
    assert tree_grow.allocate([1.0, 0.5], probs, budget=3, branch=4) == [2, 1]
    assert tree_grow.allocate([1.0, 0.5], probs, budget=5, branch=2) == [2, 2]  # branch caps a node
    assert tree_grow.allocate([0.0, 0.5], probs, budget=2, branch=4) == [0, 2]


def test_deterministic_children_are_the_top_tokens_in_order():
    kids = tree_grow.grow_level([1.0], Q_ROOT[None], budget=3, branch=4, sample=False, generator=None)
    assert [k.index for k in kids] == [1, 2, 3] and all(k.row is None for k in kids)
    assert [round(k.score, 6) for k in kids] == [0.5, 0.2, 0.15]


def test_sampled_children_carry_the_law_they_were_drawn_from():
    g = torch.Generator().manual_seed(0)
    kids = tree_grow.grow_level([1.0], Q_ROOT[None], budget=3, branch=3, sample=True, generator=g)
    assert len({k.index for k in kids}) == 3  # without replacement
    drawn = []
    for k in kids:
        expect = Q_ROOT.clone()
        expect[drawn] = 0.0
        assert torch.allclose(k.row, expect / expect.sum())
        drawn.append(k.index)


def test_only_the_first_drawn_child_of_a_node_may_have_children():
    """When sampling, a node's later siblings get path score 0 (no children at the next level):
    at T = 1 they are accepted a fraction as often as the first, whose own children matter more."""
    g = torch.Generator().manual_seed(0)
    kids = tree_grow.grow_level([1.0, 0.5], torch.stack([Q_ROOT, P_ROOT]), budget=5, branch=3, sample=True, generator=g)
    for slot, parent_score, q in ((0, 1.0, Q_ROOT), (1, 0.5, P_ROOT)):
        mine = [k for k in kids if k.slot == slot]
        assert len(mine) >= 2
        assert mine[0].score == pytest.approx(parent_score * float(q[mine[0].index]))
        assert all(k.score == 0.0 for k in mine[1:])
    nxt = tree_grow.allocate([k.score for k in kids], torch.stack([Q_ROOT] * len(kids)), budget=8, branch=4)
    assert [n > 0 for n in nxt] == [k.score > 0 for k in kids]  # the next level: first children only


def test_expandable_false_gets_no_children():
    kids = tree_grow.grow_level(
        [1.0, 1.0],
        torch.stack([Q_ROOT, Q_ROOT]),
        budget=4,
        branch=4,
        sample=False,
        generator=None,
        expandable=[False, True],
    )
    assert {k.slot for k in kids} == {1}


def _biased_grow(scores, probs, budget, branch, sample, generator, expandable=None):
    """Mutant: draw two extra children and keep the most likely ones (selection by value)."""
    kids = tree_grow.grow_level(scores, probs, budget + 2, branch + 2, sample, generator, expandable)
    return sorted(kids, key=lambda k: -float(probs[k.slot, k.index]))[:budget]


def _first_token_counts(grow, n=6000, nodes=2, seed=0):
    """Draft one level of ``nodes`` sampled children at the root, verify against P_ROOT, count
    the first emitted token."""
    g = torch.Generator().manual_seed(seed)
    target = torch.cat([P_ROOT[None], P_ROOT[None].expand(V, V)])  # rows after each node: unused here
    counts = torch.zeros(V)
    for _ in range(n):
        kids = grow([1.0], Q_ROOT[None], nodes, 4, True, g)
        tree = DraftTree(tuple(k.index for k in kids), (ROOT,) * len(kids), torch.stack([k.row for k in kids]))
        verdict = verify_tree(
            tree,
            target[: len(kids) + 1],
            uniform=lambda: float(torch.rand((), generator=g)),
            draw=lambda d: int(torch.multinomial(d, 1, generator=g)),
        )
        first = tree.tokens[verdict.path[0]] if verdict.path else verdict.correction_token
        counts[first] += 1
    return counts


@pytest.mark.parametrize("nodes", [1, 2, 4])
def test_sampled_siblings_leave_the_target_distribution_unchanged(nodes):
    assert_follows(_first_token_counts(tree_grow.grow_level, nodes=nodes), P_ROOT)


def test_mutant_keeping_the_likeliest_drawn_children_fails():
    assert_does_not_follow(_first_token_counts(_biased_grow, nodes=2), P_ROOT)
