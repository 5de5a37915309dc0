"""``python -m tools bench``: argument parsing and the command's exit codes.

This module parses and prints; the benchmark itself is ``run``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from tqdm import tqdm

from playground.models.loading import ModelUnavailable
from playground.settings import CLI, SPECS, offered
from playground.settings import check as check_settings
from playground.validate import SettingsError
from tools.bench.options import METHODS, TRACE_MODES, BenchError, BenchOptions, Progress, load_prompts
from tools.bench.report import markdown_table, write_outputs
from tools.bench.run import _validate, iter_bench


class _RaisingParser(argparse.ArgumentParser):
    """Argument errors become BenchError, so the app's Benchmark tab can show them too."""

    def error(self, message: str):
        raise BenchError(message)


def _number_list(cast: Callable[[str], Any], what: str) -> Callable[[str], tuple]:
    """An argparse type for comma-separated numbers read with ``cast``; ``what`` names one in errors."""

    def parse(s: str) -> tuple:
        try:
            vals = tuple(cast(x) for x in s.split(",") if x.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated {what}s, got {s!r}") from None
        if not vals:
            raise argparse.ArgumentTypeError(f"expected at least one {what}")
        return vals

    parse.__name__ = f"{what}_list"
    return parse


_int_list = _number_list(int, "integer")
_float_list = _number_list(float, "number")


def _str_list(s: str) -> tuple[str, ...]:
    vals = tuple(x.strip() for x in s.split(",") if x.strip())
    if not vals:
        raise argparse.ArgumentTypeError("expected at least one name")
    return vals


def build_parser() -> argparse.ArgumentParser:
    p = _RaisingParser(
        prog="python -m tools bench", description="Benchmark our loop against transformers on this machine."
    )
    p.add_argument("--preset", default=None, help="preset name (default: the default preset)")
    p.add_argument(
        "--prompts", default=None, help='JSON file {"prompts": [...]} (default: playground/data/bench_prompts.json)'
    )
    p.add_argument("--kinds", type=_str_list, default=None, help="only prompts of these kinds (e.g. grounded,general)")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--gammas", type=_int_list, default=(2, 4, 8))
    p.add_argument(
        "--tree-nodes",
        type=_int_list,
        default=(1,),
        help="1 = chain drafts; larger values add draft-tree rows with that node budget (e.g. 1,4,8,16,32)",
    )
    p.add_argument(
        "--draft-stop",
        type=_float_list,
        default=None,
        help="MTP chains stop once the head's path confidence is below this; several values add rows "
        "(0 = always γ drafts; default: the preset's draft_stop)",
    )
    p.add_argument("--temperatures", type=_float_list, default=(0.0,))
    p.add_argument("--drafters", type=_str_list, default=None)
    p.add_argument("--dtype", type=_str_list, default=None, help="float32, bfloat16 or both (comma-separated)")
    p.add_argument("--methods", type=_str_list, default=METHODS)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--trace", choices=TRACE_MODES, default="off", help="run our loop with full tracing off, on, or both"
    )
    p.add_argument("--rules", type=_str_list, default=("lossless",))
    p.add_argument("--cost-reps", type=int, default=5)
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: every core)")
    p.add_argument("--no-warmup", action="store_true")
    p.add_argument(
        "--wall-s",
        type=float,
        default=None,
        help="stop measuring after this many seconds; rows then cover the complete prompt rounds run so far",
    )
    p.add_argument(
        "--exit-layer", type=int, default=None, help="early exit: exit after this layer (default: the preset's)"
    )
    p.add_argument(
        "--no-kv-reuse",
        action="store_true",
        help="early exit: recompute the layers below the exit in the verify pass (no LayerSkip reuse)",
    )
    p.add_argument(
        "--untrained-exit",
        action="store_true",
        help="early exit: ignore the preset's trained exit adapter (compare untrained vs trained exits)",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a run setting every row runs with, e.g. --set top_p=0.9 (RunSettings' fields; repeatable)",
    )
    p.add_argument("--json", action="store_true", help='print {"rows": [...], "meta": {...}} on stdout')
    p.add_argument("--out", default="bench_results", help="directory for bench.{json,csv,md,html} ('' to skip)")
    p.add_argument("--no-progress", action="store_true")
    return p


def options_from_args(args) -> BenchOptions:
    prompts = load_prompts(args.prompts) if args.prompts or args.kinds else None
    if args.kinds:
        prompts = tuple(p for p in prompts if p.kind in args.kinds)
        if not prompts:
            raise BenchError(f"no prompts of kind {', '.join(args.kinds)}")
    if args.seed < 0:
        raise BenchError("--seed must be >= 0")
    if args.threads is not None and not 1 <= args.threads <= 256:
        raise BenchError("--threads must be between 1 and 256")
    if not 1 <= args.cost_reps <= 100:
        raise BenchError("--cost-reps must be between 1 and 100")
    return BenchOptions(
        preset=args.preset,
        prompts=prompts,
        max_new_tokens=args.max_new_tokens,
        gammas=tuple(dict.fromkeys(args.gammas)),
        tree_nodes=tuple(dict.fromkeys(args.tree_nodes)),
        draft_stops=tuple(dict.fromkeys(args.draft_stop)) if args.draft_stop else None,
        temperatures=tuple(dict.fromkeys(args.temperatures)),
        drafters=tuple(dict.fromkeys(args.drafters)) if args.drafters else None,
        dtypes=tuple(dict.fromkeys(args.dtype)) if args.dtype else None,
        methods=tuple(dict.fromkeys(args.methods)),
        repeats=args.repeats,
        seed=args.seed,
        trace=args.trace,
        rules=tuple(dict.fromkeys(args.rules)),
        cost_reps=args.cost_reps,
        warmup=not args.no_warmup,
        threads=args.threads,
        wall_s=args.wall_s,
        exit_layer=args.exit_layer,
        exit_kv_reuse=not args.no_kv_reuse,
        exit_trained=not args.untrained_exit,
        fixed=tuple(_fixed(args.set).items()),
    )


_SWEPT = (
    "mode",
    "preset",
    "gamma",
    "temperature",
    "tree_nodes",
    "draft_stop",
    "rule",
    "drafter",
    "dtype",
    "seed",
    "max_new_tokens",
)


def _fixed(items: list[str]) -> dict[str, Any]:
    """``--set name=value`` pairs as checked ``RunSettings`` values (parsed by the field's type)."""
    out: dict[str, Any] = {}
    for item in items:
        name, sep, raw = item.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or name not in SPECS or name in _SWEPT or not SPECS[name].offered:
            raise BenchError(
                f"--set {item!r}: name=value, name one of {', '.join(n for n in offered(CLI) if n not in _SWEPT)}"
            )
        kind = SPECS[name].kind
        try:
            value = raw.strip().lower() in ("1", "true", "yes") if kind is bool else kind(raw.strip())
            out |= check_settings({name: value})
        except (ValueError, SettingsError) as exc:
            raise BenchError(f"--set {item!r}: {exc}") from None
    return out


def main(argv: list[str] | None = None) -> int:

    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
        opts = options_from_args(args)
        _validate(opts)
    except BenchError as exc:
        sys.stderr.write(f"python -m tools bench: error: {exc}\n")
        return 2
    bar = None
    try:
        report = None
        for item in iter_bench(opts):
            if isinstance(item, Progress):
                if bar is None and not args.no_progress:
                    bar = tqdm(total=item.total, file=sys.stderr, unit="run", dynamic_ncols=True, leave=True)
                if bar is not None:
                    bar.n = item.done
                    bar.set_description_str(item.label[:60])
                    bar.refresh()
            else:
                report = item
    except BenchError as exc:
        if bar is not None:
            bar.close()
        sys.stderr.write(f"python -m tools bench: error: {exc}\n")
        return 2
    except ModelUnavailable as exc:
        if bar is not None:
            bar.close()
        sys.stderr.write(f"python -m tools bench: error: {exc}\n")
        return 2
    if bar is not None:
        bar.close()
    assert report is not None
    paths = write_outputs(report, args.out) if args.out else {}
    report.meta["outputs"] = paths
    for note in report.meta.get("notes", []):
        sys.stderr.write(f"note: {note}\n")
    if args.json:
        print(json.dumps(report.to_json(), ensure_ascii=False))
    else:
        print(markdown_table(report.rows, report.meta))
        if paths:
            print("wrote " + ", ".join(paths.values()))
    return 0
