"""``python -m tools loadtest``: many clients against a running app's ``/speculate``.

    python -m tools loadtest --url http://127.0.0.1:7860 --clients 30 --requests 1

Each client sends ``--requests`` requests, one after another; all clients start together
(the classroom case: everyone presses Run within a second).  Request j of client i uses
seed ``(i * requests + j) % distinct``: ``--distinct 1`` (default) sends the same request
from everyone, a larger value mixes different runs (use ``--temperature`` > 0 so seeds
matter); ``--own-prompts`` gives every request its own prompt as well (a class typing
its own).  After the clock stops, every answer is compared with the same request run
alone in this process (``--reference local``, the default) with the draft lengths the
server's run had (the server shortens drafts under load; at T > 0 a seed's tokens depend
on them), or with the server's own sequential answer computed before the concurrent
phase (``--reference server``; weaker: its trace cache then answers the concurrent phase).
A bfloat16 answer whose passes were shared may differ from the run alone by rounding (a
pass over many rows rounds differently from a pass over one): it is counted apart, as
"bf16 rounding", and does not fail the test; in float32 every answer must be equal.
Prints p50/p95 latency, throughput, errors, mismatches, how many runs each target pass
carried, and the server's resident memory before and after (found by its listening port
when it runs on this machine, else ``--pid``).

This module does not start a server and never imports gradio (only gradio_client).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from urllib.parse import urlparse


@dataclass
class LoadReport:
    url: str
    clients: int
    requests: int
    distinct: int
    preset: str | None
    max_new_tokens: int
    temperature: float
    reference: str
    wall_s: float = 0.0
    latencies_s: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    mismatches: int = 0
    # bfloat16 answers whose passes were shared and that differ from the run alone: a pass over
    # many rows rounds differently from a pass over one (in float32 they are equal, and tested).
    rounding: int = 0
    replays: int = 0
    tokens: int = 0
    rss_before_mb: float | None = None
    rss_after_mb: float | None = None
    shared_rows: list[int] = field(default_factory=list)  # per step of every answer: runs its pass carried

    @property
    def ok(self) -> int:
        return len(self.latencies_s)

    def percentile(self, q: float) -> float | None:
        if not self.latencies_s:
            return None
        xs = sorted(self.latencies_s)
        return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))]

    def summary(self) -> dict:
        total = self.clients * self.requests
        return {
            "requests": total,
            "ok": self.ok,
            "errors": len(self.errors),
            "mismatches": self.mismatches,
            "bf16_rounding": self.rounding,
            "replayed_or_followed": self.replays,
            "p50_s": self.percentile(0.5),
            "p95_s": self.percentile(0.95),
            "mean_s": statistics.fmean(self.latencies_s) if self.latencies_s else None,
            "throughput_req_s": self.ok / self.wall_s if self.wall_s else None,
            "throughput_tok_s": self.tokens / self.wall_s if self.wall_s else None,
            "wall_s": self.wall_s,
            "rss_before_mb": self.rss_before_mb,
            "rss_after_mb": self.rss_after_mb,
            "mean_shared_rows": statistics.fmean(self.shared_rows) if self.shared_rows else None,
        }


def server_rss_mb(url: str, pid: int | None = None) -> float | None:
    """Resident memory of the server process (by pid, or the local process listening on the URL's port)."""
    try:
        import psutil
    except ImportError:  # pragma: no cover - psutil comes with accelerate
        return None
    try:
        if pid is None:
            port = urlparse(url).port
            host = urlparse(url).hostname
            if host not in ("127.0.0.1", "localhost", "0.0.0.0", "::1") or port is None:
                return None
            for conn in psutil.net_connections(kind="tcp"):
                if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN and conn.pid:
                    pid = conn.pid
                    break
        if pid is None:
            return None
        return psutil.Process(pid).memory_info().rss / 1e6
    except (psutil.Error, OSError):
        return None


def _request_kwargs(args, seed: int, prompt: str | None = None) -> dict:
    kw = dict(
        prompt=prompt if prompt is not None else args.prompt,
        gamma=args.gamma,
        temperature=args.temperature,
        top_k=0,
        top_p=1.0,
        seed=seed,
        max_new_tokens=args.max_new_tokens,
    )
    if args.preset:
        kw["preset"] = args.preset
    if args.drafter:
        kw["drafter"] = args.drafter
    if args.dtype:
        kw["dtype"] = args.dtype
    return kw


def _requests(args) -> list[list[dict]]:
    """Per client, its requests' keyword arguments: request j of client i has seed
    ``(i * requests + j) % distinct + seed`` and, with ``--own-prompts``, prompt number
    ``i * requests + j`` of the held-out prompts (cycled)."""
    from tools.batch_sweep import class_prompts  # noqa: PLC0415  (reads the prompt file)

    n = args.clients * args.requests
    prompts = class_prompts(n) if args.own_prompts else [None] * n
    return [
        [_request_kwargs(args, (i * args.requests + j) % args.distinct + args.seed, prompts[i * args.requests + j])
         for j in range(args.requests)]
        for i in range(args.clients)
    ]  # fmt: skip


def _local_tokens(kw: dict, draft_caps: list[int] | None) -> list[int]:
    """The request run alone in this process, with the draft lengths the server's run had."""
    from playground import api  # noqa: PLC0415  (loads models: only with --reference local)

    kw = dict(kw)
    prompt = kw.pop("prompt")
    return list(api.run(prompt, api.run_settings(**kw), draft_caps=draft_caps).token_ids)


def _draft_caps(answer: dict) -> list[int] | None:
    """The per-step draft lengths of a speculative answer (its steps' ``gamma``)."""
    steps = answer.get("steps") or []
    if not steps or steps[0].get("mode") != "speculative":
        return None
    return [int(step.get("gamma", 0)) for step in steps]


def _rounds_differently(answer: dict) -> bool:
    """A bfloat16 run whose target passes carried other runs' rows: its logits come from a
    pass of another shape than the run alone, which in bfloat16 rounds differently (a near
    tie may then go the other way, and at T > 0 a draw too).  Not a mismatch of the
    algorithm: in float32 such a run equals the run alone (tests/serving/test_serving.py)."""
    shared = any(step.get("shared_rows", 1) > 1 for step in answer.get("steps") or [])
    return shared and (answer.get("config") or {}).get("dtype") == "bfloat16"


def run_load(args) -> LoadReport:
    from gradio_client import Client

    requests = _requests(args)
    report = LoadReport(
        url=args.url,
        clients=args.clients,
        requests=args.requests,
        distinct=args.distinct,
        preset=args.preset,
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        reference=args.reference,
    )
    report.rss_before_mb = server_rss_mb(args.url, args.pid)
    # Over plain HTTP nothing is verified, so no client loads a CA bundle: gradio_client builds
    # an httpx client (and its SSL context) per call, and loading certifi's bundle each time
    # cost the load test ~0.2 CPU-s per request, taken from the server's cores when both run
    # on one machine.
    verify = args.url.startswith("https://")
    server_reference: dict[str, list[int]] = {}
    if args.reference == "server":
        base = Client(args.url, verbose=False, ssl_verify=verify)
        for kw in (kw for client in requests for kw in client):
            key = json.dumps(kw, sort_keys=True)
            if key not in server_reference:
                server_reference[key] = base.predict(**kw, api_name="/speculate")["token_ids"]
    clients = [Client(args.url, verbose=False, ssl_verify=verify) for _ in range(args.clients)]  # before the clock
    lock = threading.Lock()
    barrier = threading.Barrier(args.clients)
    answers: list[tuple[dict, dict]] = []

    def client(i: int) -> None:
        barrier.wait()
        for kw in requests[i]:
            t0 = time.perf_counter()
            try:
                out = clients[i].predict(**kw, api_name="/speculate")
            except Exception as exc:  # the server's message, e.g. "busy, try again in 30 s"
                with lock:
                    report.errors.append(" ".join(str(exc).split())[:200] or type(exc).__name__)
                continue
            dt = time.perf_counter() - t0
            with lock:
                report.latencies_s.append(dt)
                report.tokens += len(out.get("token_ids", ()))
                report.replays += int(bool((out.get("config") or {}).get("replay")))
                answers.append((kw, out))

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(args.clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(args.timeout)
    report.wall_s = time.perf_counter() - t0
    report.rss_after_mb = server_rss_mb(args.url, args.pid)
    report.shared_rows = [s.get("shared_rows", 1) for _, out in answers for s in out.get("steps") or []]
    for kw, out in answers:  # after the clock: the reference must not compete with the server
        if args.reference == "server":
            expected = server_reference[json.dumps(kw, sort_keys=True)]
        else:
            expected = _local_tokens(kw, _draft_caps(out))
        if list(out.get("token_ids", ())) != expected:
            if _rounds_differently(out):
                report.rounding += 1
            else:
                report.mismatches += 1
    return report


def format_report(report: LoadReport) -> str:
    s = report.summary()

    def sec(x):
        return "n/a" if x is None else f"{x:.2f} s"

    def mb(x):
        return "n/a" if x is None else f"{x:,.0f} MB"

    lines = [
        f"{report.clients} clients x {report.requests} request(s) on {report.url} "
        f"(preset {report.preset or 'default'}, {report.max_new_tokens} tokens, T={report.temperature:g}, "
        f"{report.distinct} distinct request(s), reference: {report.reference})",
        "| p50 | p95 | throughput | errors | answers != alone | bf16 rounding | replayed/followed | runs per pass "
        "| server RSS before -> after |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        f"| {sec(s['p50_s'])} | {sec(s['p95_s'])} | {s['throughput_req_s'] or 0:.2f} req/s "
        f"({s['throughput_tok_s'] or 0:.1f} tok/s) | {s['errors']} | {s['mismatches']} | {s['bf16_rounding']} | "
        f"{s['replayed_or_followed']} | "
        f"{s['mean_shared_rows'] or 1:.1f} | {mb(s['rss_before_mb'])} -> {mb(s['rss_after_mb'])} |",
    ]
    for e in sorted(set(report.errors))[:5]:
        lines.append(f"error x{report.errors.count(e)}: {e}")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m tools loadtest", description=__doc__.split("\n\n")[0])
    p.add_argument("--url", required=True, help="the running app, e.g. http://127.0.0.1:7860")
    p.add_argument("--clients", type=int, default=30)
    p.add_argument("--requests", type=int, default=1, help="requests per client, one after another")
    p.add_argument("--preset", default=None)
    p.add_argument("--drafter", default=None)
    p.add_argument(
        "--dtype",
        choices=["float32", "bfloat16"],
        default=None,
        help="the requests' dtype (default: the preset's); in float32 every answer must equal its run alone",
    )
    p.add_argument("--prompt", default="The capital of France is")
    p.add_argument(
        "--own-prompts", action="store_true", help="each request its own prompt (the held-out prompts, cycled)"
    )
    p.add_argument("--gamma", type=int, default=None)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--distinct", type=int, default=1, help="distinct seeds among the requests (1 = all identical)")
    p.add_argument("--seed", type=int, default=0, help="first seed")
    p.add_argument("--reference", choices=["local", "server"], default="local")
    p.add_argument("--pid", type=int, default=None, help="server pid for its RSS (default: found by port)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for each client")
    p.add_argument("--json", action="store_true")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    for name in ("clients", "requests", "distinct"):
        if not 1 <= getattr(args, name) <= 1000:
            sys.stderr.write(f"error: --{name} must be between 1 and 1000\n")
            return 2
    report = run_load(args)
    if args.json:
        print(json.dumps({**asdict(report), "summary": report.summary()}))
    else:
        print(format_report(report))
    return 0 if not report.errors and not report.mismatches else 1
