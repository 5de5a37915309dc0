"""Draft trees: the data structure, the tree attention mask, and lossless tree verification.

A chain drafts one continuation; a tree drafts several that share prefixes (SpecInfer,
Medusa, EAGLE-2).  The target scores every node in ONE forward pass: node i attends to
the committed context and its own ancestors only, at position (committed length - 1 +
depth(i)).  Verification walks down from the root:

  r <- p at the current node
  for each child c (in order):     accept c with probability min(1, r(x_c) / q_c(x_c))
      accepted: descend into c     (r <- p at c)
      rejected: r <- norm(max(0, r - q_c))
  no child accepted: emit a token drawn from r (a "resample" after rejections, the
  "bonus" from p when the node has no children)

q_c must be the exact law child c was drawn from *given its parent and its earlier
siblings*: a one-hot row for deterministic children (top-k, copied n-grams), q itself
for siblings drawn i.i.d. with replacement, q renormalised over the tokens not drawn
yet for siblings drawn without replacement.  Why it is lossless: at a node with residual
r and a child drawn from q_c (which depends only on what was drawn before it), the
output is min(r, q_c)(y) + (1 - sum min(r, q_c)) * norm(max(0, r - q_c))(y) = r(y); the
residual handed to the next sibling depends only on earlier siblings, so induction over
the siblings gives r = p at the node.  A chain is the tree whose nodes have one child.

This module is pure: no models, no caches; randomness comes in as two callables.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from playground.decoding.acceptance import acceptance_prob, is_accepted, residual_distribution
from playground.decoding.point_mass import one_hot

ROOT = -1  # the parent of the first drafted tokens: the newest committed token


@dataclass(frozen=True)
class DraftTree:
    """Drafted nodes in topological order (every parent before its children).

    tokens[i] is node i's token; parents[i] is the index of its parent node, or ROOT.
    draft_probs[i] ([V]) is the exact law node i was drawn from given its parent and its
    earlier siblings; None means every node is deterministic (a one-hot row)."""

    tokens: tuple[int, ...]
    parents: tuple[int, ...]
    draft_probs: torch.Tensor | None = None  # [n, V]

    def __post_init__(self) -> None:
        if len(self.tokens) != len(self.parents):
            raise ValueError("tokens and parents must have the same length")
        for i, parent in enumerate(self.parents):
            if not ROOT <= parent < i:
                raise ValueError(f"node {i}: parent {parent} must be ROOT or an earlier node")
        if self.draft_probs is not None and self.draft_probs.shape[0] != len(self.tokens):
            raise ValueError("draft_probs needs one row per node")

    @staticmethod
    def chain(tokens: Sequence[int], draft_probs: torch.Tensor | None = None) -> DraftTree:
        return DraftTree(tuple(int(t) for t in tokens), tuple(range(-1, len(tokens) - 1)), draft_probs)

    def __len__(self) -> int:
        return len(self.tokens)

    def children(self, node: int) -> list[int]:
        return [i for i, parent in enumerate(self.parents) if parent == node]

    def depth(self, node: int) -> int:
        """1 for a child of the root."""
        d = 0
        while node != ROOT:
            node, d = self.parents[node], d + 1
        return d

    def path(self, node: int) -> list[int]:
        """Node indices from the root's child down to ``node``."""
        out = []
        while node != ROOT:
            out.append(node)
            node = self.parents[node]
        return out[::-1]

    def q_row(self, node: int, vocab_size: int) -> torch.Tensor:
        if self.draft_probs is None:
            return one_hot(torch.tensor(self.tokens[node]), vocab_size)  # [V]
        return self.draft_probs[node].float()  # [V]


def tree_attention_mask(tree: DraftTree, past_len: int) -> torch.Tensor:
    """[n+1, past_len+n+1] bool: row 0 is the root (the newest committed token, fed first),
    row i+1 is node i; True where the query may attend.  Every row sees the whole cache and
    the root; a node sees its ancestors and itself, never a sibling's subtree."""
    n = len(tree)
    mask = torch.zeros(n + 1, past_len + n + 1, dtype=torch.bool)
    mask[:, : past_len + 1] = True  # the committed context and the root
    for i in range(n):
        for j in tree.path(i):
            mask[i + 1, past_len + 1 + j] = True
    return mask


def tree_position_ids(tree: DraftTree, past_len: int) -> torch.Tensor:
    """[n+1]: the root at past_len, node i at past_len + depth(i)."""
    return torch.tensor([past_len] + [past_len + tree.depth(i) for i in range(len(tree))], dtype=torch.long)


@dataclass(frozen=True)
class NodeDecision:
    node: int
    u: float | None
    accept_prob: float
    accepted: bool
    residual_before: torch.Tensor | None  # [V] the r this sibling was judged against
    residual_after: torch.Tensor | None = None  # [V] rejected: the r it left for the next sibling (keep_residuals)


@dataclass(frozen=True)
class TreeVerdict:
    path: tuple[int, ...]  # accepted nodes, root's child first
    decisions: tuple[NodeDecision, ...]  # judged nodes in the order they were judged
    correction_kind: str | None  # "resample" | "bonus" | None (an accepted EOS ended the step)
    correction_node: int  # the node whose children were tried last (ROOT for none accepted)
    correction_dist: torch.Tensor | None  # [V] the distribution the correction was drawn from
    correction_token: int | None


def verify_tree(
    tree: DraftTree,
    target_probs: torch.Tensor,  # [n+1, V]: row 0 at the root, row i+1 after node i
    *,
    uniform: Callable[[], float],
    draw: Callable[[torch.Tensor], int],
    eos: frozenset[int] = frozenset(),
    update_residual: bool = True,  # False is a teaching mutant: siblings judged against the same r
    keep_residuals: bool = False,
) -> TreeVerdict:
    """Walk the tree from the root, accepting at most one child per node (see module doc)."""
    vocab = target_probs.shape[-1]
    node, path, decisions = ROOT, [], []
    while True:
        r = target_probs[node + 1].float()  # [V] p at this node
        kids = tree.children(node)
        chosen = None
        for c in kids:
            x = tree.tokens[c]
            q = tree.q_row(c, vocab)
            a = acceptance_prob(float(r[x]), float(q[x]))
            u = uniform()
            ok = is_accepted(u, a)
            if ok:
                decisions.append(NodeDecision(c, u, a, ok, r if keep_residuals else None))
                chosen = c
                break
            after = residual_distribution(r, q) if update_residual else r
            decisions.append(
                NodeDecision(c, u, a, ok, r if keep_residuals else None, after if keep_residuals else None)
            )
            r = after
        if chosen is None:
            kind = "resample" if kids else "bonus"
            token = draw(r)
            return TreeVerdict(tuple(path), tuple(decisions), kind, node, r, int(token))
        path.append(chosen)
        node = chosen
        if tree.tokens[chosen] in eos:
            return TreeVerdict(tuple(path), tuple(decisions), None, node, None, None)
