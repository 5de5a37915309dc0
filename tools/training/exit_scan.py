"""Choosing the early-exit layer: greedy agreement and draft cost of every exit, measured.

    python -m tools.training.exit_scan [--preset P] [--max-new-tokens N] [--prompts K] [--reps R] [--json]

For each exit layer k = 1 .. L-1 of the preset's target:

* ``agreement``: how often the exit's argmax (hidden state after layer k -> final norm ->
  LM head) equals the full model's, at every position of the target's own greedy
  continuations of the bench prompts: the acceptance rate α of a greedy early-exit draft
  whose prefix is right;
* ``c``: one exit pass / one full pass, single token, same cache length (medians over
  ``reps`` interleaved timings) — the draft cost;
* ``predicted``: the best predicted speedup over γ = 1..8,
  E(α, γ) / (γ c + v(γ + 1)), E = (1 - α^(γ+1)) / (1 - α), with v measured the same way.

and ``per_cost`` = α / c, drafts accepted per full pass spent drafting.

The default exit of a preset (``exit_layer`` in spaces_config.yaml) is the k with the best
α / c; the scan prints the table it was chosen from.  (The best *predicted speedup* is not
used: where every exit is a slowdown, as with untrained exits here, it favours the
cheapest exit, whose drafts are almost never accepted — k = 1 on SmolLM2-135M.)  This module does not
run the decoding loop (the bench does: ``python -m tools bench --drafters early-exit``)
and does not train exits (``train-drafter --drafter early-exit`` does); where the preset has
trained exits (``exit_adapter``), the scan adds a row per trained layer (``--untrained``: skip).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import asdict, dataclass

import torch
from transformers import DynamicCache

from playground.api import resolve
from playground.drafters.early_exit import exit_logits, exit_model
from playground.drafters.exit_adapter import preset_adapters
from playground.models.loading import load_pair
from playground.models.view import num_layers
from tools.bench import load_prompts


@dataclass(frozen=True)
class ExitPoint:
    layer: int
    agreement: float  # greedy top-1 agreement with the full model
    c: float  # exit pass / full pass
    best_gamma: int
    predicted: float  # E(α, γ) / (γ c + v) at best_gamma
    trained: bool = False  # with the preset's exit adapter (playground.drafters.exit_adapter)

    @property
    def per_cost(self) -> float:
        return self.agreement / self.c if self.c > 0 else 0.0


def expected_tokens(alpha: float, gamma: int) -> float:
    """Tokens per verify pass for i.i.d. acceptance α and γ drafts (Leviathan et al.)."""
    return float(gamma + 1) if alpha >= 1.0 else (1.0 - alpha ** (gamma + 1)) / (1.0 - alpha)


@torch.inference_mode()
def agreement(target, sequences: list[tuple[int, list[int]]], adapters: dict | None = None) -> list[float]:
    """[L] entry k: top-1 agreement of exit k with the full model (entry 0 unused) over the
    generated positions of each (prompt length, prompt + continuation) sequence; exit k
    reads A h_k where ``adapters`` has an adapter A for k."""
    adapters = adapters or {}
    n = num_layers(target)
    hits = [0] * n
    total = 0
    for n_prompt, ids in sequences:
        out = target(torch.tensor([ids], device=target.device), output_hidden_states=True)
        rows = slice(n_prompt - 1, len(ids) - 1)  # positions that predicted the continuation
        full = out.logits[0, rows].argmax(-1)  # [T]
        for k in range(1, n):
            logits = exit_logits(target, out.hidden_states[k][0, rows], adapters.get(k))  # [T, V]
            hits[k] += int((logits.argmax(-1) == full).sum())
        total += int(full.numel())
    return [h / total if total else 0.0 for h in hits]


@torch.inference_mode()
def pass_costs(
    target, ids: list[int], layers: list[int], sizes: list[int], reps: int, adapters: dict | None = None
) -> tuple[dict, dict]:
    """({k: c}, {n: v(n)}): interleaved single-pass timings at the same cache length (len(ids) - 9;
    passes of n <= 9 tokens, cropped after each); exit k with its adapter where ``adapters`` has one."""
    adapters = adapters or {}
    models = {
        ("full", 1): target,
        **{("exit", k): exit_model(target, k, adapters.get(k)) for k in layers},
        **{("full", s): target for s in sizes if s > 1},
    }
    caches = {}
    for key, model in models.items():
        cache = DynamicCache(config=model.config)
        cache.activate_past_recording()
        model(input_ids=torch.tensor([ids[:-9]], device=target.device), cache=cache, use_cache=True, logits_to_keep=1)
        caches[key] = cache
    times: dict = {key: [] for key in models}
    for _ in range(reps):
        for key, model in models.items():
            n = key[1] if key[0] == "full" else 1
            t0 = time.perf_counter()
            out = model(
                input_ids=torch.tensor([ids[-9:][:n]], device=target.device),
                cache=caches[key],
                use_cache=True,
                logits_to_keep=n,
            )
            out.logits.max(-1)
            times[key].append(time.perf_counter() - t0)
            caches[key].crop(-n)
    med = {key: statistics.median(v) for key, v in times.items()}
    t1 = med[("full", 1)]
    return ({k: med[("exit", k)] / t1 for k in layers}, {s: (med[("full", s)] / t1 if s > 1 else 1.0) for s in sizes})


def scan(
    target,
    tokenizer,
    prompts: list[str],
    max_new_tokens: int = 32,
    reps: int = 7,
    gammas: tuple[int, ...] = (1, 2, 3, 4, 6, 8),
    adapters: dict | None = None,
) -> list[ExitPoint]:
    """One point per exit layer (untrained), then one per layer ``adapters`` has (trained)."""
    adapters = adapters or {}
    sequences = []
    with torch.inference_mode():
        for text in prompts:
            ids = [int(i) for i in tokenizer(text)["input_ids"]]
            out = target.generate(
                torch.tensor([ids], device=target.device), max_new_tokens=max_new_tokens, do_sample=False
            )
            sequences.append((len(ids), [int(t) for t in out[0].tolist()]))
    layers = list(range(1, num_layers(target)))
    points = []
    for trained, ks, adapt in ((False, layers, None), (True, sorted(adapters), adapters)):
        if not ks:
            continue
        alphas = agreement(target, sequences, adapt)
        c, v = pass_costs(target, sequences[0][1], ks, [g + 1 for g in gammas], reps, adapt)
        for k in ks:
            best = max(gammas, key=lambda g: expected_tokens(alphas[k], g) / (g * c[k] + v[g + 1]))
            s = expected_tokens(alphas[k], best) / (best * c[k] + v[best + 1])
            points.append(ExitPoint(k, round(alphas[k], 3), round(c[k], 3), best, round(s, 3), trained))
    return points


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.training.exit_scan", description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default=None)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--prompts", type=int, default=6, help="the first K bench prompts")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--untrained", action="store_true", help="skip the preset's trained exits")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    preset, _ = resolve(args.preset, None)
    pair = load_pair(preset)
    prompts = [p.text for p in load_prompts()][: args.prompts]
    adapters = {} if args.untrained else preset_adapters(preset, pair.target)
    points = scan(pair.target, pair.tokenizer, prompts, args.max_new_tokens, args.reps, adapters=adapters)
    if args.json:
        print(json.dumps([{**asdict(p), "per_cost": round(p.per_cost, 3)} for p in points]))
        return 0
    print(
        f"{preset.name} ({pair.dtype}, {torch.get_num_threads()} threads): exit layer, greedy agreement α, "
        f"draft cost c, α/c, best γ, predicted speedup S"
    )
    for p in points:
        print(
            f"  k={p.layer:>2}{' trained' if p.trained else ''}  α={p.agreement:.3f}  c={p.c:.2f}  α/c={p.per_cost:.2f}  γ={p.best_gamma}  "
            f"S={p.predicted:.2f}"
        )
    best = max(points, key=lambda p: p.per_cost)  # trained or not
    fastest = max(points, key=lambda p: p.predicted)
    print(
        f"default exit (best α/c): k={best.layer}{' trained' if best.trained else ''} (α={best.agreement:.3f}, c={best.c:.2f}, S={best.predicted:.2f} "
        f"at γ={best.best_gamma}); best predicted S: k={fastest.layer} ({fastest.predicted:.2f})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
