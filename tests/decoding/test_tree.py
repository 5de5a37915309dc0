"""Tree verification (playground.decoding.tree): exact output distributions on a 5-token vocabulary
for deterministic, i.i.d. and without-replacement siblings; mutants that must fail; the
chain as a special case equal to engine.verify; the tree attention mask."""

from __future__ import annotations

import itertools
import math
import random
from collections import defaultdict

import pytest
import torch

from playground.decoding.engine import verify
from playground.decoding.sampling import residual_distribution
from playground.decoding.tree import ROOT, DraftTree, tree_attention_mask, tree_position_ids, verify_tree

V = 5


def table(seed: int, temperature: float):
    """A distribution over V tokens for every prefix (a tuple), fixed by (seed, prefix)."""

    def dist(prefix: tuple) -> torch.Tensor:
        g = torch.Generator().manual_seed(hash((seed,) + prefix) % (2**31))
        logits = torch.randn(V, generator=g, dtype=torch.float64) * 1.5
        if temperature == 0:
            return torch.nn.functional.one_hot(logits.argmax(), V).double()
        return torch.softmax(logits / temperature, dim=-1)

    return dist


def sibling_draws(q: torch.Tensor, k: int, scheme: str):
    """Every way to draw k siblings from q: (tokens, rows each was drawn from, probability).
    scheme: "topk" (deterministic, one-hot rows), "iid" (with replacement, rows = q),
    "wor" (without replacement, rows = q renormalised over the tokens not drawn yet)."""
    if scheme == "topk":
        order = sorted(range(V), key=lambda t: (-float(q[t]), t))[:k]
        yield order, [torch.nn.functional.one_hot(torch.tensor(t), V).double() for t in order], 1.0
        return
    for toks in itertools.product(range(V), repeat=k):
        prob, rows, left = 1.0, [], q.clone()
        for t in toks:
            row = q.clone() if scheme == "iid" else left / left.sum()
            prob *= float(row[t])
            rows.append(row)
            if scheme == "wor":
                left = left.clone()
                left[t] = 0.0
        if prob > 0:
            yield list(toks), rows, prob


def random_trees(shape: tuple[int, ...], p, q, scheme: str, unconditional: bool = False):
    """Every tree of the given shape (children per level) with its probability.
    unconditional: MUTANT rows for without-replacement siblings (the plain q)."""

    def grow(level: int, node: int, prefix: tuple, tokens, parents, rows):
        if level == len(shape):
            yield tokens, parents, rows, 1.0
            return
        qd = q(prefix)
        for toks, trows, pr in sibling_draws(qd, shape[level], scheme):
            if unconditional:
                trows = [qd.clone() for _ in trows]
            # add these siblings, then grow each one's subtree in turn
            base = len(tokens)
            t2, p2, r2 = tokens + toks, parents + [node] * len(toks), rows + trows
            subtrees = [(t2, p2, r2, pr)]
            for j, t in enumerate(toks):
                nxt = []
                for tt, pp, rr, prp in subtrees:
                    for tt2, pp2, rr2, prs in grow(level + 1, base + j, prefix + (t,), tt, pp, rr):
                        nxt.append((tt2, pp2, rr2, prp * prs))
                subtrees = nxt
            yield from subtrees

    for tokens, parents, rows, pr in grow(0, ROOT, (), [], [], []):
        yield DraftTree(tuple(tokens), tuple(parents), torch.stack(rows)), pr


def target_rows(tree: DraftTree, p) -> torch.Tensor:
    rows = [p(())] + [p(tuple(tree.tokens[j] for j in tree.path(i))) for i in range(len(tree))]
    return torch.stack(rows)  # [n+1, V]


def step_output(tree: DraftTree, rows: torch.Tensor, update_residual: bool = True) -> dict[tuple, float]:
    """Exact distribution of what one verify_tree step emits (accepted path + correction)."""

    def at(node: int) -> dict[tuple, float]:
        r, out, reach = rows[node + 1], defaultdict(float), 1.0
        for c in tree.children(node):
            x, q = tree.tokens[c], tree.draft_probs[c]
            a = min(1.0, float(r[x]) / float(q[x])) if float(q[x]) > 0 else 0.0
            for seq, pr in at(c).items():
                out[(x,) + seq] += reach * a * pr
            reach *= 1.0 - a
            if update_residual:
                r = residual_distribution(r, q).double()
        for y in range(V):
            out[(y,)] += reach * float(r[y])
        return out

    return at(ROOT)


def first_tokens_pmf(trees, p, length: int, update_residual: bool = True) -> dict[tuple, float]:
    """P(first `length` tokens = s) when one tree step is followed by exact target sampling."""
    pmf = defaultdict(float)
    for tree, tree_prob in trees:
        for seq, pr in step_output(tree, target_rows(tree, p), update_residual).items():
            seq = seq[:length]
            if len(seq) == length:
                pmf[seq] += tree_prob * pr
                continue
            for rest in itertools.product(range(V), repeat=length - len(seq)):  # the target goes on
                full, prob = seq, tree_prob * pr
                for t in rest:
                    prob *= float(p(full)[t])
                    full = full + (t,)
                pmf[full] += prob
    return pmf


def max_error(pmf: dict, p, length: int) -> float:
    worst = 0.0
    for s in itertools.product(range(V), repeat=length):
        truth = math.prod(float(p(s[:i])[s[i]]) for i in range(length))
        worst = max(worst, abs(pmf.get(s, 0.0) - truth))
    return worst


# Children per level: one child, a wide root, a small tree, a chain.  Sampled siblings are
# enumerated over every draw, so their trees stay small ((2, 2) would be 15,625 trees).
CASES = [("topk", s) for s in [(1,), (3,), (2, 2), (1, 1, 1)]] + [
    (scheme, s) for scheme in ("iid", "wor") for s in [(1,), (3,), (2, 1), (1, 1, 1)]
]


@pytest.mark.parametrize("temperature", [0.0, 0.7, 1.0])
@pytest.mark.parametrize("scheme, shape", CASES)
def test_tree_step_is_lossless_exactly(scheme, shape, temperature):
    if temperature == 0 and scheme != "topk":
        pytest.skip("at T = 0 drafters draw deterministically")
    p, q = table(1, temperature), table(2, max(temperature, 0.5))
    length = len(shape) + 1
    pmf = first_tokens_pmf(random_trees(shape, p, q, scheme), p, length)
    assert max_error(pmf, p, length) < 1e-6


@pytest.mark.parametrize("shape", [(3,), (2, 2)])
def test_mutant_no_residual_update_between_siblings_fails(shape):
    p, q = table(1, 1.0), table(2, 1.0)
    pmf = first_tokens_pmf(random_trees(shape, p, q, "topk"), p, len(shape) + 1, update_residual=False)
    assert max_error(pmf, p, len(shape) + 1) > 1e-3


@pytest.mark.parametrize("shape", [(2,), (3,), (2, 1)])
def test_mutant_unconditional_q_for_without_replacement_siblings_fails(shape):
    p, q = table(1, 1.0), table(2, 1.0)
    trees = random_trees(shape, p, q, "wor", unconditional=True)
    assert max_error(first_tokens_pmf(trees, p, len(shape) + 1), p, len(shape) + 1) > 1e-3


def test_a_chain_tree_is_engine_verify():
    """Same inputs and the same uniform draws: the tree verifier and the chain verifier agree."""
    for seed in range(40):
        rnd = random.Random(seed)
        k = rnd.randint(1, 4)
        p = torch.softmax(torch.randn(k + 1, V, generator=torch.Generator().manual_seed(seed)), -1)
        q = torch.softmax(torch.randn(k, V, generator=torch.Generator().manual_seed(seed + 99)), -1)
        drafts = [rnd.randrange(V) for _ in range(k)]
        us = [rnd.random() for _ in range(k + 1)]
        draws_chain, draws_tree = [], []

        def draw_from(record):
            return lambda d: record.append(d) or int(torch.argmax(d))

        it1, it2 = iter(us), iter(us)
        chain = verify(drafts, q, p, uniform=lambda: next(it1), draw=draw_from(draws_chain))
        tree = verify_tree(DraftTree.chain(drafts, q), p, uniform=lambda: next(it2), draw=draw_from(draws_tree))
        assert len(tree.path) == chain.n_accepted
        assert tree.correction_token == chain.correction_token
        assert torch.allclose(draws_tree[0], draws_chain[0])
        assert tree.correction_kind == chain.correction_kind


def test_mask_and_positions():
    #        root
    #       /    \
    #     n0      n1
    #    /  \
    #  n2    n3
    tree = DraftTree(tokens=(10, 11, 12, 13), parents=(ROOT, ROOT, 0, 0))
    mask = tree_attention_mask(tree, past_len=3)  # [5, 8]
    assert mask.shape == (5, 8)
    assert mask[:, :4].all()  # the cache (3) and the root
    expect = {1: [0], 2: [1], 3: [0, 2], 4: [0, 3]}  # row -> nodes it sees
    for row, nodes in expect.items():
        seen = [j for j in range(4) if mask[row, 4 + j]]
        assert seen == nodes, row
    assert not mask[0, 4:].any()  # the root sees no drafts
    assert tree_position_ids(tree, 3).tolist() == [3, 4, 4, 5, 5]
    assert tree.path(3) == [0, 3] and tree.depth(3) == 2 and tree.children(0) == [2, 3]


def test_trees_must_be_topologically_ordered():
    with pytest.raises(ValueError, match="parent"):
        DraftTree(tokens=(1, 2), parents=(1, ROOT))


def test_kept_residuals_are_the_residual_each_rejection_left_and_change_nothing():
    """keep_residuals (the trace's residual bars) records r after each rejected sibling:
    norm(max(0, r - q)) of the r it was judged against; the verdict is the same without it."""
    p = torch.tensor([[0.1, 0.2, 0.3, 0.4, 0.0], [0.2] * 5, [0.2] * 5, [0.2] * 5], dtype=torch.float64)
    tree = DraftTree((3, 2, 1), (ROOT, ROOT, ROOT))  # three one-hot siblings at the root
    us = [0.99, 0.99, 0.99]
    plain = verify_tree(tree, p, uniform=iter(us).__next__, draw=lambda d: int(d.argmax()))
    kept = verify_tree(tree, p, uniform=iter(us).__next__, draw=lambda d: int(d.argmax()), keep_residuals=True)
    assert (plain.path, plain.correction_token) == (kept.path, kept.correction_token)
    rejected = [d for d in kept.decisions if not d.accepted]
    assert len(rejected) == 3 and all(d.residual_after is not None for d in rejected)
    for d in rejected:
        q = tree.q_row(d.node, V)
        assert torch.allclose(d.residual_after, residual_distribution(d.residual_before, q))
    for a, b in zip(rejected, rejected[1:]):  # the next sibling was judged against what the last one left
        assert torch.equal(a.residual_after, b.residual_before)
    assert torch.equal(rejected[-1].residual_after, kept.correction_dist)  # and the resample drew from it
    assert all(d.residual_after is None for d in plain.decisions)


def test_the_registry_says_which_drafters_branch():
    """Every kind the registry marks as branching has a propose_tree of its own, and the others
    only the base class's (their chain as a one-branch tree); each kind's class is the one named."""
    import importlib

    from playground.drafters.base import BaseDrafter
    from playground.drafters.registry import KINDS

    classes = {
        "model": "model.ModelDrafter",
        "prompt-lookup": "prompt_lookup.PromptLookupDrafter",
        "mtp": "mtp.MTPDrafter",
        "mtp+lookup": "hybrid.HybridDrafter",
        "gemma4-assistant": "gemma4_assistant.Gemma4AssistantDrafter",
        "early-exit": "early_exit.EarlyExitDrafter",
        "other-tokenizer": "other_tokenizer.OtherTokenizerDrafter",
    }
    assert set(classes) == set(KINDS)
    for name, path in classes.items():
        module, cls = path.rsplit(".", 1)
        drafter = getattr(importlib.import_module(f"playground.drafters.{module}"), cls)
        assert KINDS[name].drafter is drafter and drafter.name == name, name
        assert (drafter.propose_tree is not BaseDrafter.propose_tree) == KINDS[name].capabilities.branches, name
