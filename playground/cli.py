"""Command line: ``python -m playground {presets,generate}``; the tools (bench, training, load
test, ...) are ``python -m tools``.

Bad arguments exit with code 2 and a one-line message; a run that fails (a model
that cannot load, an error inside the loop) exits with code 1 and a one-line
message.  Neither prints a traceback (``SPECPLAY_DEBUG=1`` re-raises).  This
module only parses arguments and prints; the work happens elsewhere.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from playground import api
from playground.config import load_config
from playground.decoding.records import GenerationResult
from playground.drafters.registry import NAMES
from playground.errors import ModelUnavailable
from playground.models.loading import availability
from playground.settings import CLI, SPECS, offered, public_name
from playground.validate import DTYPES, MODES

TOOLS = ("bench", "batch-sweep", "loadtest", "check-space", "train-drafter")  # ``python -m tools``


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise SystemExit(2)


def _fail(msg: str, code: int = 2) -> int:
    sys.stderr.write(f"error: {msg}\n")
    return code


def cmd_presets(args) -> int:
    cfg = load_config()
    rows = []
    for p in cfg.presets:
        ok, reason = availability(p)
        rows.append(
            {
                "name": p.name,
                "label": p.label,
                "default": p.name == cfg.default_preset,
                "available": ok,
                "reason": reason,
                "source": p.source,
                "target": p.target,
                "drafter": p.drafter,
                "drafter_model": p.drafter_model,
                "drafters": list(p.drafters),
                "dtype": p.dtype,
                "gamma": p.gamma,
            }
        )
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for r in rows:
            mark = "*" if r["default"] else " "
            status = "available" if r["available"] else f"unavailable: {r['reason']}"
            print(f"{mark} {r['name']:<22} {r['target']} + {r['drafter']}  ({status})")
    return 0


def _plain_marks(step) -> str:
    """Text of one step with ASCII marks: [ok], [x rejected], {resampled}, <bonus>."""
    out = []
    for d in step.drafted:
        if d.accepted:
            out.append(d.text)
        elif d.judged:
            out.append(f"[x{d.text}]")
    c = step.correction
    if c is not None:
        if c.kind == "resample":
            out.append("{" + c.text + "}")
        elif c.kind == "bonus":
            out.append("<" + c.text + ">")
        else:
            out.append(c.text)
    return "".join(out)


def cmd_generate(args) -> int:
    try:
        settings = api.run_settings(**{name: getattr(args, name) for name in offered(CLI)})
        items = api.stream_run(args.prompt, settings)
        result = None
        for item in items:
            if isinstance(item, GenerationResult):
                result = item
            elif not args.json:
                sys.stdout.write(_plain_marks(item))
                sys.stdout.flush()
    except ValueError as exc:
        return _fail(str(exc))
    except ModelUnavailable as exc:
        return _fail(str(exc), code=1)
    if args.json:
        print(json.dumps(result.to_dict(), ensure_ascii=False))
    else:
        s = result.stats
        acc = "n/a" if s.acceptance_rate is None else f"{s.acceptance_rate:.2f}"
        print()
        print(
            f"-- {s.new_tokens} tokens in {s.wall_ms / 1000:.2f} s ({s.tokens_per_s:.1f} tok/s), "
            f"{s.mode}{' / ' + s.drafter if s.drafter else ''}, acceptance {acc}, "
            f"{s.tokens_per_target_call:.2f} tokens per target call. "
            "Marks: [xrejected] {resampled} <bonus>"
        )
    return 0


_CHOICES = {"drafter": list(NAMES), "dtype": list(DTYPES), "mode": list(MODES)}  # argparse lists them in --help


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m playground", description="Speculative Decoding Playground engine")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    sub.required = True
    p = sub.add_parser("presets", help="list model presets")
    p.add_argument("--json", action="store_true")
    g = sub.add_parser("generate", help="generate text with speculative or autoregressive decoding")
    g.add_argument("--prompt", required=True)
    for name in offered(CLI):  # every setting the command line offers, from RunSettings' schema
        spec, flag = SPECS[name], "--" + public_name(name).replace("_", "-")
        choices = _CHOICES.get(name)
        g.add_argument(flag, dest=name, type=spec.kind, default=None, choices=choices, help=spec.doc)
    g.add_argument("--json", action="store_true")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; any failure becomes one line on stderr and exit code 1."""
    try:
        return _dispatch(argv)
    except KeyboardInterrupt:
        sys.stderr.write("\ninterrupted\n")
        return 130
    except Exception as exc:
        if os.environ.get("SPECPLAY_DEBUG"):
            raise
        sys.stdout.flush()
        message = " ".join(str(exc).split()) or "(no message)"
        return _fail(f"the run failed: {type(exc).__name__}: {message}", code=1)


def _dispatch(argv: list[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in TOOLS:  # the tools beside the engine have their own entry point
        return _fail(f"{argv[0]} is one of the tools beside the engine: python -m tools {' '.join(argv)}")
    args = build_parser().parse_args(argv)
    if args.command == "presets":
        return cmd_presets(args)
    return cmd_generate(args)
