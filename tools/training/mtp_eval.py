"""Held-out evaluation of the MTP drafter, by category: what ``train-drafter --eval-only`` prints.

The prompts (``playground/data/heldout_prompts.json``) are stories, factual Q&A, code in
two languages, Chinese, lists and chat turns, none of them a training prompt.  For each,
the target (bf16) writes a greedy continuation (what a temperature-0 run drafts for) and
a sampled one at T=1; one prefill caches what the drafter sees, and the head is run on
every position at once (``unrolled_states``), exactly as ``MTPDrafter`` would score it:
the static candidates, the context's other tokens and, with clusters, the tokens of the
step's best clusters.

* T=0: draft j is accepted iff it equals the target's argmax; a chain goes on only while
  every earlier draft was accepted (on greedy text the inputs are then exactly the
  drafts).  Reported: conditional acceptance by position, and its product (cumulative).
* T=1: the expected acceptance of draft j, sum_x min(p(x), q(x)), along the sampled text
  (the earlier drafts taken equal to the text's tokens).  p is the target's top-k from the
  cache, so the figure is a lower bound by at most the mass outside the top-k.

Every category also reports how much the target's own continuations repeat
(``playground.repetition``: the share of generated tokens completing a 4-gram already in the
prompt or earlier, distinct-2, how many continuations are repetitive: share >= 0.5), and two
more rows pool every category's repetitive and non-repetitive continuations: a greedy
base model loops, and a head that only learned to copy loops looks good on them.

This module measures; it does not train, and it changes no weights.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import torch

from playground import repetition
from playground.drafters.mtp_head import MTPConfig, cluster_members, unrolled_states
from playground.drafters.mtp_weights import load_head
from tools.paths import DATA
from tools.training.mtp_train.features import prefill_features
from tools.training.mtp_train.gen import sample_batch

NON_REPETITIVE = "non-repetitive outputs"
REPETITIVE = "repetitive outputs"
HELDOUT = DATA / "heldout_prompts.json"
NEW_TOKENS = 96


def heldout_prompts(path: Path = HELDOUT) -> list[tuple[str, str]]:
    """(category, prompt) pairs in file order."""
    cats = json.loads(path.read_text(encoding="utf-8"))["categories"]
    return [(c, p) for c, ps in cats.items() for p in ps]


def heldout_rows(model, tok, work: Path, seed: int = 0) -> list[dict]:
    """Greedy (variant 0) and T=1 sampled (variant 1) continuations of every held-out prompt,
    cached in ``work/heldout`` under a hash of the prompts."""

    items = heldout_prompts()
    key = hashlib.sha256(json.dumps([items, NEW_TOKENS, seed]).encode()).hexdigest()[:12]
    path = work / "heldout" / f"rows_{key}.json"
    if path.exists():
        return json.loads(path.read_text())
    path.parent.mkdir(parents=True, exist_ok=True)
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    gen_eos = getattr(model.generation_config, "eos_token_id", None) or tok.eos_token_id
    eos = set(gen_eos) if isinstance(gen_eos, (list, tuple)) else {gen_eos}
    rows = []
    for variant in (0, 1):
        for b in range(0, len(items), 12):
            batch = items[b : b + 12]
            enc = [tok(p).input_ids for _, p in batch]
            width = max(len(e) for e in enc)
            ids = torch.tensor([[pad] * (width - len(e)) + e for e in enc])
            mask = torch.tensor([[0] * (width - len(e)) + [1] * len(e) for e in enc])
            g = torch.Generator().manual_seed(seed * 7919 + b + 1000 * variant)
            out = sample_batch(
                model, ids, mask, NEW_TOKENS, pad, eos, greedy=variant == 0, generator=g, temperature=1.0, top_k=None
            )
            for r, (cat, _) in enumerate(batch):
                new = out[r].tolist()
                stop = [k for k, t in enumerate(new) if t in eos]
                new = [t for t in (new[: stop[0] + 1] if stop else new) if t != pad]
                rows.append(
                    {"prompt": b + r, "variant": variant, "category": cat, "ids": enc[r] + new, "n_prompt": len(enc[r])}
                )
    path.write_text(json.dumps(rows))
    return rows


def heldout_features(args, model, rows: list[dict], work: Path) -> dict:

    key = hashlib.sha256(json.dumps([[r["ids"] for r in rows], args.topk]).encode()).hexdigest()[:12]
    path = work / "heldout" / f"features_{key}.pt"
    if path.exists():
        return torch.load(path, weights_only=False)

    class _Bar:
        def update(self, n):
            pass

    feats = prefill_features(args, model, rows, MTPConfig.from_target(model.config), _Bar())
    feats["meta"] = [{**m, "category": r["category"]} for m, r in zip(feats["meta"], rows)]
    torch.save(feats, path)
    return feats


def _in_set(ids: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """[V] bool: True at ``ids`` (the static candidates)."""
    mask = torch.zeros(vocab_size, dtype=torch.bool)
    mask[ids] = True
    return mask


def _first_seen(tok: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """[V]: the first position of each token in the sequence ``tok`` [T] (T + 1 if absent), so
    token x is in the context of position n iff ``first[x] <= n``."""
    T = tok.numel()
    first = torch.full((vocab_size,), T + 1, dtype=torch.long)
    return first.scatter_reduce_(0, tok, torch.arange(T), "amin")


def _support(head, states, first, n_idx, in_static, members):
    """[P, V] bool: what the drafter scores for P chains (static ∪ context ∪ best clusters).

    first: [V] first position of each token in the chain's sequence; n_idx: [P] the chain's
    newest committed position."""
    sup = in_static[None, :] | (first[None, :] <= n_idx[:, None])
    if members is not None:
        mem = head.cluster_tokens(states.to(head.cluster_proj.weight.dtype), members)  # as MTPDrafter._score
        rows = torch.arange(states.shape[0])[:, None].expand_as(mem)
        ok = mem >= 0
        sup[rows[ok], mem[ok]] = True
    return sup


@torch.no_grad()
def acceptance(head, feats: dict, embed_weight: torch.Tensor, scale: float, steps: int = 6) -> dict:
    """Acceptance by category and position: {"t0": {cat: {...}}, "t1": {cat: {...}}}."""

    head = head.float().eval()
    cfg = head.cfg
    V = embed_weight.shape[0]
    in_static = _in_set(head.candidates, V)
    members = cluster_members(head.token_cluster, cfg.num_clusters) if cfg.num_clusters else None
    offs = feats["offsets"]
    nkv, D = cfg.num_key_value_heads, cfg.head_dim
    out: dict = {"t0": {}, "t1": {}}
    by_class: dict = {"t0": {}, "t1": {}}  # every category's continuations, pooled by repetition
    for i, meta in enumerate(feats["meta"]):
        a, b = int(offs[i]), int(offs[i + 1])
        T = b - a
        tok = feats["tokens"][a:b].long()
        emb = (embed_weight[tok].float() * scale)[None]
        hid = feats["hidden"][a:b].float()[None]
        K = feats["keys"][a:b].float().view(1, T, nkv, D).transpose(1, 2)
        Vv = feats["values"][a:b].float().view(1, T, nkv, D).transpose(1, 2)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            states = unrolled_states(head, emb, hid, K, Vv, steps)
        first = _first_seen(tok, V)
        top_ids = feats["top_ids"][a:b].long()
        top_p = feats["top_p"][a:b].float()
        n0 = meta["n_prompt"] - 1  # chains start at the last prompt token
        chains = torch.arange(n0, T - 1)
        alive = torch.ones(chains.numel(), dtype=torch.bool)
        cat = meta.get("category", "all")
        key = "t0" if meta["variant"] == 0 else "t1"
        rep = repetition.measure(tok[: meta["n_prompt"]].tolist(), tok[meta["n_prompt"] :].tolist())
        cls = REPETITIVE if rep.tokens and rep.share >= repetition.HIGH_SHARE else NON_REPETITIVE
        accs = [out[key].setdefault(cat, _bucket(steps)), by_class[key].setdefault(cls, _bucket(steps))]
        for acc in accs:
            acc["chains"] += int(chains.numel())
            _add_repetition(acc, rep)
        for j in range(1, steps + 1):
            pos = chains + j - 1  # target distribution at n+j-1 judges draft j
            ok = pos <= T - 1
            if not bool(ok.any()):
                break
            c, p_ = chains[ok], pos[ok]
            s = states[j - 1][0, c].float()  # [P, H]
            logits = s @ embed_weight.t().float() if V <= 4096 else (s.to(torch.bfloat16) @ embed_weight.t()).float()
            sup = _support(head, s, first, c, in_static, members)
            logits = logits.masked_fill(~sup, float("-inf"))
            if key == "t0":
                al = alive[ok]
                draft = logits.argmax(-1)
                hit = draft == top_ids[p_, 0]
                for acc in accs:
                    acc["reached"][j - 1] += int(al.sum())
                    acc["accepted"][j - 1] += int((al & hit).sum())
                nxt_ok = torch.zeros_like(alive)
                nxt = torch.where(p_ + 1 < T, tok[(p_ + 1).clamp_max(T - 1)], -1)
                nxt_ok[ok] = al & hit & (nxt == top_ids[p_, 0])
                alive = nxt_ok
            else:
                q = torch.softmax(logits, -1)
                alpha = torch.minimum(top_p[p_], q.gather(1, top_ids[p_])).sum(-1)
                for acc in accs:
                    acc["alpha_sum"][j - 1] += float(alpha.sum())
                    acc["alpha_n"][j - 1] += int(alpha.numel())
    res = _summarise(out, steps)
    pooled = _summarise(by_class, steps)
    for key in ("t0", "t1"):  # after "all", never summed into it
        for cls in (NON_REPETITIVE, REPETITIVE):
            if cls in pooled[key]:
                res[key][cls] = pooled[key][cls]
    return res


def _bucket(steps: int) -> dict:
    return {
        "reached": [0] * steps,
        "accepted": [0] * steps,
        "alpha_sum": [0.0] * steps,
        "alpha_n": [0] * steps,
        "chains": 0,
        "seqs": 0,
        "gen_tokens": 0,
        "repeated": 0,
        "distinct2_sum": 0.0,
        "repetitive": 0,
    }


def _add_repetition(acc: dict, rep) -> None:
    acc["seqs"] += 1
    acc["gen_tokens"] += rep.tokens
    acc["repeated"] += rep.repeated
    acc["distinct2_sum"] += rep.distinct2
    acc["repetitive"] += int(rep.tokens > 0 and rep.share >= repetition.HIGH_SHARE)


@torch.no_grad()
def target_profile(feats: dict, candidates: torch.Tensor | None, vocab_size: int) -> dict:
    """How hard each category is for *any* drafter with this support, from the target alone.

    Over the generated positions of the greedy (T=0) text: ``top1`` the probability the
    target gives its own choice, ``entropy`` (nats) of its top-k distribution renormalised,
    ``reachable`` the share of its choices a drafter scoring ``candidates`` plus the
    context's tokens can draft at all (an upper bound on T=0 acceptance at position 1).
    Over the sampled (T=1) text: ``reachable_mass`` the target's top-k mass on that support
    (an upper bound on sum_x min(p, q)).  ``candidates`` None: every token is draftable (a
    head with clusters reaches the whole vocabulary through them)."""
    in_static = _in_set(candidates, vocab_size) if candidates is not None else torch.ones(vocab_size, dtype=torch.bool)
    offs = feats["offsets"]
    sums: dict = {}
    for i, meta in enumerate(feats["meta"]):
        a, b = int(offs[i]), int(offs[i + 1])
        T = b - a
        tok = feats["tokens"][a:b].long()
        first = _first_seen(tok, vocab_size)
        pos = torch.arange(meta["n_prompt"] - 1, T - 1)  # the distributions that judge drafts
        ids = feats["top_ids"][a:b][pos].long()  # [P, k]
        p = feats["top_p"][a:b][pos].float()  # [P, k]
        sup = in_static[ids] | (first[ids] <= pos[:, None])
        key = "t0" if meta["variant"] == 0 else "t1"
        acc = sums.setdefault(key, {}).setdefault(meta.get("category", "all"), [0.0, 0.0, 0.0, 0])
        if key == "t0":
            pn = p / p.sum(-1, keepdim=True)
            acc[0] += float(p[:, 0].sum())
            acc[1] += float(-(pn * pn.clamp_min(1e-12).log()).sum())
            acc[2] += float(sup[:, 0].float().sum())
        else:
            acc[0] += float((p * sup).sum())
        acc[3] += int(pos.numel())
    res: dict = {}
    for key, cats in sums.items():
        cats = dict(cats)
        cats["all"] = [sum(c[f] for c in cats.values()) for f in range(4)]
        for cat, (x, e, r, n) in cats.items():
            n = max(n, 1)
            row = res.setdefault(cat, {})
            if key == "t0":
                row.update(top1=x / n, entropy=e / n, reachable=r / n)
            else:
                row["reachable_mass"] = x / n
    return res


def format_profile(prof: dict) -> str:
    lines = [
        "## The target on the held-out text (no drafter involved)",
        "",
        "| category | target's p of its own choice (T=0) | entropy, nats (T=0) | its choice draftable (T=0) "
        "| its mass draftable (T=1) |",
        "|---|---:|---:|---:|---:|",
    ]
    for cat, r in prof.items():
        cells = [r.get(k, float("nan")) for k in ("top1", "entropy", "reachable", "reachable_mass")]
        lines.append(f"| {cat} | " + " | ".join(f"{x:.2f}" for x in cells) + " |")
    return "\n".join(lines) + "\n"


def _summarise(out: dict, steps: int) -> dict:
    res: dict = {"t0": {}, "t1": {}}
    for key in ("t0", "t1"):
        cats = dict(out[key])
        if cats:
            tot = _bucket(steps)
            for c in cats.values():
                for f in ("reached", "accepted", "alpha_sum", "alpha_n"):
                    tot[f] = [x + y for x, y in zip(tot[f], c[f])]
                for f in ("chains", "seqs", "gen_tokens", "repeated", "distinct2_sum", "repetitive"):
                    tot[f] += c.get(f, 0)
            cats["all"] = tot
        for cat, c in cats.items():
            if key == "t0":
                cond = [a / r if r else float("nan") for a, r in zip(c["accepted"], c["reached"])]
                cum, run = [], 1.0
                for x in cond:
                    run *= x if x == x else 0.0
                    cum.append(run)
                res[key][cat] = {"chains": c["chains"], "conditional": cond, "cumulative": cum}
            else:
                res[key][cat] = {
                    "chains": c["chains"],
                    "alpha": [s / n if n else float("nan") for s, n in zip(c["alpha_sum"], c["alpha_n"])],
                }
            if c.get("seqs"):
                res[key][cat].update(
                    seqs=c["seqs"],
                    repeated_4gram_share=c["repeated"] / max(c["gen_tokens"], 1),
                    distinct_2=c["distinct2_sum"] / c["seqs"],
                    repetitive=c["repetitive"],
                )
    return res


def _repetition_cells(r: dict) -> str:
    if "seqs" not in r:
        return " – | – | – |"
    return f" {r['repeated_4gram_share']:.2f} | {r['distinct_2']:.2f} | {r['repetitive']}/{r['seqs']} |"


def format_report(res: dict, label: str) -> str:
    lines = [
        f"## {label}",
        "",
        "T=0, greedy text: acceptance at position 1..6 (conditional; cumulative in brackets); how much the "
        "text repeats (repeated 4-grams: share of generated tokens completing a 4-gram already seen; "
        f"repetitive: continuations with a share >= {repetition.HIGH_SHARE:g})",
        "",
        "| category | chains | "
        + " | ".join(f"pos {j}" for j in range(1, 7))
        + " | repeated 4-grams | distinct-2 | repetitive |",
        "|---|---:|" + "---:|" * 9,
    ]
    for cat, r in res["t0"].items():
        cells = [f"{c:.2f} ({u:.2f})" for c, u in zip(r["conditional"], r["cumulative"])]
        lines.append(f"| {cat} | {r['chains']} | " + " | ".join(cells) + " |" + _repetition_cells(r))
    lines += [
        "",
        "T=1, sampled text: expected acceptance sum_x min(p, q) at position 1..6",
        "",
        "| category | chains | "
        + " | ".join(f"pos {j}" for j in range(1, 7))
        + " | repeated 4-grams | distinct-2 | repetitive |",
        "|---|---:|" + "---:|" * 9,
    ]
    for cat, r in res["t1"].items():
        lines.append(
            f"| {cat} | {r['chains']} | " + " | ".join(f"{a:.2f}" for a in r["alpha"]) + " |" + _repetition_cells(r)
        )
    return "\n".join(lines) + "\n"


def write_bench_prompts(path: Path, per_category: int = 2) -> Path:
    """The first ``per_category`` held-out prompts of every category as a ``python -m
    playground bench --prompts`` file: one kind ("held-out"), so the bench reports one
    speedup over all of them (the acceptance tables give the categories)."""
    seen: dict[str, int] = {}
    items = []
    for c, p in heldout_prompts():
        seen[c] = seen.get(c, 0) + 1
        if seen[c] <= per_category:
            items.append((c, p))
    path.write_text(
        json.dumps(
            {"prompts": [{"id": f"{c}-{i}", "kind": "held-out", "text": p} for i, (c, p) in enumerate(items)]},
            ensure_ascii=False,
        )
    )
    return path


def run_eval(args, model, tok, weights: list[str], embed_weight, scale) -> dict:
    """Evaluate each weights directory on the held-out set; print and return the results."""

    work = Path(args.work)
    t0 = time.perf_counter()
    rows = heldout_rows(model, tok, work, args.seed)
    feats = heldout_features(args, model, rows, work)
    print(f"held-out: {len(rows)} continuations, {int(feats['offsets'][-1])} tokens ({time.perf_counter() - t0:.0f} s)")
    results = {}
    for w in weights:
        head = load_head(w, dtype=torch.float32)
        res = acceptance(head, feats, embed_weight, scale)
        cand = None if head.cfg.num_clusters else head.candidates
        res["target"] = target_profile(feats, cand, embed_weight.shape[0])
        results[w] = res
        print(format_profile(res["target"]))
        print(format_report(res, f"{w} ({head.cfg.num_clusters} clusters)"))
    return results
