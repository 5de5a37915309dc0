"""Growing one level of a draft tree: which frontier nodes get how many children, and which.

Every drafter that branches (the two-model drafter, the MTP head, the Gemma 4 assistant)
asks its model for a distribution at each frontier node and hands it here.  The shape rule
is EAGLE-2's: a node's children compete across the whole level by *path probability*
(the product of the drafter's probabilities along the path), and the ``per_level`` best
are kept.

Two ways to pick the children, both lossless under ``playground.decoding.tree.verify_tree``:

* **deterministic** (temperature 0, or when asked): a node's children are its most
  likely tokens, in order; each q row is one-hot (``rows`` is None).
* **sampled without replacement** (temperature > 0): a node's children are drawn one
  after another from q with the tokens already drawn removed; child k's row is q
  renormalised over the tokens not drawn before it — exactly the law it was drawn from.
  Only the first child drawn at a node may have children of its own.  After the first
  sibling is rejected the residual norm(max(0, p − q)) sits where q underestimates p,
  and later siblings, drawn from the same q, rarely land there: with the MTP head at
  T = 1 the first sibling was accepted 57% of the time and the next three 13–16% each.
  Spreading each level over every sibling left the accepted first child without
  children of its own in about two steps of three.  With the next levels under first
  children only, full 16-node trees (γ 4, no ``draft_stop``) carried 2.40 tokens per
  target call instead of 2.15 (the chain: 2.05); with the MTP preset's ``draft_stop``,
  which rarely lets a sampled tree past depth 2, 1.75 against 1.79 (8 training prompts ×
  2 seeds, 48 tokens).

Exactness constrains the *shape* when sampling: whether a child exists may depend on
anything drawn before it, never on its own value or its later siblings' (which sibling
was drawn first is fixed before any value is).  So the number of children each node
gets is decided *before* drawing them, from the parents' path probabilities and the
sorted probabilities of their q rows (known in advance); the drawn children's own
probabilities only shape the next level.  (Keeping the best of several drawn children
would prefer likely tokens: a biased q.)

This module is pure: no models; randomness comes in as a torch.Generator.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from playground.decoding.sampling import draw_index


@dataclass(frozen=True)
class Child:
    slot: int  # index of its parent in the level that was expanded
    index: int  # index into the distribution's columns (a token id, or a candidate index)
    score: float  # path probability, for the next level's allocation
    row: torch.Tensor | None  # [N] the exact law it was drawn from; None = one-hot (deterministic)


def allocate(scores: list[float], probs: torch.Tensor, budget: int, branch: int, min_score: float = 0.0) -> list[int]:
    """Children per node: the ``budget`` best (score × j-th largest probability) slots,
    j < branch, taken as a prefix per node; slots worth less than ``min_score`` are not
    drafted (``playground.decoding.draft_stop``: the tree stops growing where the drafter is unsure).
    probs: [T, N]."""
    k = min(branch, probs.shape[-1])
    top = torch.topk(probs.float(), k, dim=-1).values.tolist()  # [T][k], descending
    slots = sorted(
        (c for c in ((s * top[t][j], t, j) for t, s in enumerate(scores) for j in range(k)) if c[0] >= min_score),
        key=lambda c: -c[0],
    )
    counts = [0] * len(scores)
    for _, t, _ in slots[:budget]:
        counts[t] += 1  # descending within a node, so the slots of a node form a prefix
    return counts


def grow_level(
    scores: list[float],
    probs: torch.Tensor,
    budget: int,
    branch: int,
    sample: bool,
    generator: torch.Generator | None,
    expandable: list[bool] | None = None,
    min_score: float = 0.0,
) -> list[Child]:
    """The children of one level, siblings together in the order they are tried.

    scores: the frontier nodes' path probabilities; probs: [T, N], row t the distribution
    at node t (the sampling law when ``sample``, else the drafter's softmax, which only
    shapes the tree); expandable[t] False: node t gets no children (e.g. it is an EOS);
    min_score: a child slot worth less (path score × its sorted probability) is not drafted
    — decided before any child is drawn, so sampling stays exact."""
    probs = probs.float().cpu() if sample else probs.float()  # draws use the run's CPU generator
    if expandable is not None:
        scores = [s if ok else 0.0 for s, ok in zip(scores, expandable)]
    counts = allocate(scores, probs, budget, branch, min_score)
    out: list[Child] = []
    for t, m in enumerate(counts):
        if m == 0 or scores[t] <= 0.0:
            continue
        q = probs[t]
        if not sample:
            top = torch.topk(q, m)
            out += [Child(t, int(i), scores[t] * float(v), None) for v, i in zip(top.values, top.indices)]
            continue
        left = q.clone()
        for j in range(m):
            mass = float(left.sum())
            if mass <= 1e-12:
                break  # q's support is used up
            row = left / mass
            i = draw_index(row, generator)
            # Only a node's first drawn child may have children (score 0: never expanded; see above).
            out.append(Child(t, i, scores[t] * float(q[i]) if j == 0 else 0.0, row))
            left = left.clone()
            left[i] = 0.0
    return out
