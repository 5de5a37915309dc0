"""One speculative step with a draft tree: draft, verify every node in one pass, walk, compact.

The tree counterpart of the chain step in ``playground.decoding.engine``: it takes the same
``LoopState`` and returns the same ``Step``.

  1. Draft    — the drafter proposes a tree (``propose_tree``) of up to ``tree_nodes`` nodes.
  2. Verify   — ONE target pass over [x_last, every node] with a tree attention mask.
  3. Accept   — walk down from the root; at each node try its children in order against
                the running residual (``playground.decoding.tree.verify_tree``).
  4. Correct  — a resample from the residual after every child failed, or the bonus
                from p at a leaf.
  Then the target cache keeps only x_last and the accepted path (``Target.compact``).

This module returns what the step decided; the loop commits it and writes the record.
"""

from __future__ import annotations

import time

import torch

from playground.decoding.confidence import with_tree_confidence
from playground.decoding.records import Correction, DraftDecision
from playground.decoding.rows import PointRows, row_top, target_rows, top
from playground.decoding.sampling import sample
from playground.decoding.step import LoopState, Step
from playground.decoding.tree import DraftTree, verify_tree


def tree_step(loop: LoopState, k_max: int) -> Step:
    """Steps 1-4 with a tree of up to ``settings.tree_nodes`` nodes and depth ``k_max``: one pass
    over every node, the lossless walk, then the cache keeps the root and the accepted path."""
    target, params, generator, texts, eos = loop.target, loop.params, loop.generator, loop.texts, loop.eos
    committed, top_n = loop.committed, loop.settings.top_n
    t0 = time.perf_counter()
    draft = loop.drafter.propose_tree(loop.state, loop.settings.tree_nodes, k_max, params, generator)
    draft_ms = (time.perf_counter() - t0) * 1000.0
    tree = _cut(draft.tree, k_max, eos)

    out = target.forward_tree(committed[-1], tree, hidden=loop.want_hidden)  # logits [n+1, V], hidden [n+1, H]
    target_probs, argmax = target_rows(out.logits, params)
    verdict = verify_tree(
        tree,
        target_probs if not params.greedy else _dense(target_probs, tree),
        uniform=lambda: float(torch.rand((), generator=generator)),
        draw=lambda d: sample(d, generator),  # a greedy run's rows are point masses: no randomness used
        eos=eos,
        keep_residuals=texts is not None,  # the trace shows the residual after each rejected sibling
    )
    path = list(verdict.path)
    target.compact(len(tree) + 1, [0] + [1 + j for j in path])

    vocab = out.logits.shape[-1]
    decisions = _decisions(tree, verdict, target_probs, argmax, committed, vocab, texts, top_n)
    emitted = [tree.tokens[j] for j in path]
    correction = _correction(verdict, target_probs, argmax, committed + emitted, len(path), texts, top_n)
    if texts is not None:  # a traced run: how sure the target was (the chips' bars)
        row = verdict.correction_node + 1 if correction is not None else None
        decisions, correction = with_tree_confidence(decisions, correction, out.logits, row)
    if correction is not None:
        emitted = emitted + [correction.token_id]
    last_row = 0 if not path else 1 + path[-1]
    return Step(
        decisions=tuple(decisions),
        correction=correction,
        emitted=tuple(emitted),
        n_accepted=len(path),
        drafted=len(tree),
        judged=tuple((tree.depth(d.node), d.accepted) for d in verdict.decisions),
        draft_ms=draft_ms,
        verify_ms=out.ms,
        forward_calls=draft.forward_calls,
        info={**draft.info, "tree_nodes": len(tree), "accepted_path": path},
        hidden=out.hidden[last_row] if out.hidden is not None else None,
    )


def _decisions(
    tree: DraftTree, verdict, target_probs, argmax, committed: list[int], vocab: int, texts, top_n: int
) -> list[DraftDecision]:
    """One DraftDecision per node: judged nodes carry their verdict; an unjudged node its
    p/q against its parent's row, as the step panel shows it."""
    judged = {d.node: d for d in verdict.decisions}
    decisions = []
    for i, tok in enumerate(tree.tokens):
        prefix = committed + [tree.tokens[j] for j in tree.path(i)[:-1]]
        q = tree.q_row(i, vocab)
        d = judged.get(i)
        r_x = (d.accept_prob * float(q[tok])) if d is not None else float(target_probs[tree.parents[i] + 1, tok])
        decisions.append(
            DraftDecision(
                position=tree.depth(i),
                token_id=int(tok),
                text=texts.in_context(prefix, tok) if texts else "",
                draft_prob=float(q[tok]),
                target_prob=min(1.0, r_x),
                ratio=(r_x / float(q[tok])) if float(q[tok]) > 0 else None,
                accept_prob=d.accept_prob
                if d is not None
                else min(1.0, r_x / float(q[tok]))
                if float(q[tok]) > 0
                else 0.0,
                u=d.u if d is not None else None,
                judged=d is not None,
                accepted=bool(d is not None and d.accepted),
                target_top=row_top(
                    target_probs, tree.parents[i] + 1, top_n, texts, argmax[tree.parents[i] + 1] if argmax else None
                ),
                draft_top=(top(q, top_n, texts, int(tok)) if tree.draft_probs is None else top(q, top_n, texts)),
                parent=int(tree.parents[i]),
                residual_top=(
                    _residual_top(d.residual_after, top_n, texts)
                    if d is not None and d.residual_after is not None
                    else ()
                ),
            )
        )

    return decisions


def _correction(
    verdict, target_probs, argmax, committed: list[int], n_accepted: int, texts, top_n: int
) -> Correction | None:
    """The token the verdict adds after the accepted path (resample or bonus), or None."""
    if verdict.correction_token is None:
        return None
    row = verdict.correction_node + 1
    tok = verdict.correction_token
    point = argmax[row] if argmax else None
    return Correction(
        kind=verdict.correction_kind,
        position=n_accepted + 1,
        token_id=int(tok),
        text=texts.in_context(committed, tok) if texts else "",
        prob=float(verdict.correction_dist[tok]),
        target_prob=float(target_probs[row, tok]),
        distribution_top=top(verdict.correction_dist, top_n, texts, point),
        target_top=row_top(target_probs, row, top_n, texts, point) if verdict.correction_kind == "resample" else (),
        draft_top=(),
    )


def _cut(tree: DraftTree, max_depth: int, eos: frozenset[int]) -> DraftTree:
    """Drop nodes deeper than ``max_depth`` (the token budget) and below an EOS node."""
    keep, new_index = [], {}
    for i in range(len(tree)):
        parent = tree.parents[i]
        if tree.depth(i) > max_depth or (parent >= 0 and (parent not in new_index or tree.tokens[parent] in eos)):
            continue
        new_index[i] = len(keep)
        keep.append(i)
    if len(keep) == len(tree):
        return tree
    parents = tuple(-1 if tree.parents[i] < 0 else new_index[tree.parents[i]] for i in keep)
    rows = tree.draft_probs[keep] if tree.draft_probs is not None else None
    return DraftTree(tuple(tree.tokens[i] for i in keep), parents, rows)


def _residual_top(dist: torch.Tensor, n: int, texts):
    """``top`` of a residual; a point mass (every residual of a greedy run) is answered
    without a top-k over the vocabulary."""
    value, index = dist.max(dim=-1)
    return top(dist, n, texts, int(index) if float(value) >= 1.0 else None)


def _dense(rows: PointRows, tree: DraftTree) -> torch.Tensor:
    """Greedy target rows as a dense [n+1, V] tensor for verify_tree (n is small)."""
    return torch.stack([rows[i] for i in range(len(rows))])
