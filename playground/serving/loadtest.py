"""``python -m playground loadtest``: many clients against a running app's ``/speculate``.

    python -m playground loadtest --url http://127.0.0.1:7860 --clients 30 --requests 1

Each client sends ``--requests`` requests, one after another; all clients start together
(the classroom case: everyone presses Run within a second).  Request j of client i uses
seed ``(i * requests + j) % distinct``: ``--distinct 1`` (default) sends the same request
from everyone, a larger value mixes different runs (use ``--temperature`` > 0 so seeds
matter).  Every answer is compared with the sequential answer for its seed, computed in
this process with ``playground.generate`` (``--reference local``, the default when the
preset loads here) or by the server before the concurrent phase (``--reference server``;
weaker: the server's trace cache then answers the concurrent phase).  Prints p50/p95
latency, throughput, errors, mismatches and the server's resident memory before and after
(found by its listening port when it runs on this machine, else ``--pid``).

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
    replays: int = 0
    tokens: int = 0
    rss_before_mb: float | None = None
    rss_after_mb: float | None = None

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
            "replayed_or_followed": self.replays,
            "p50_s": self.percentile(0.5),
            "p95_s": self.percentile(0.95),
            "mean_s": statistics.fmean(self.latencies_s) if self.latencies_s else None,
            "throughput_req_s": self.ok / self.wall_s if self.wall_s else None,
            "throughput_tok_s": self.tokens / self.wall_s if self.wall_s else None,
            "wall_s": self.wall_s,
            "rss_before_mb": self.rss_before_mb,
            "rss_after_mb": self.rss_after_mb,
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


def _request_kwargs(args, seed: int) -> dict:
    kw = dict(
        prompt=args.prompt,
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
    return kw


def _local_reference(args, seeds: list[int]) -> dict[int, list[int]]:
    from playground.api import generate

    out = {}
    for s in seeds:
        kw = _request_kwargs(args, s)
        prompt = kw.pop("prompt")
        out[s] = list(generate(prompt, **kw).token_ids)
    return out


def run_load(args) -> LoadReport:
    from gradio_client import Client

    seeds = sorted(
        {(i * args.requests + j) % args.distinct + args.seed for i in range(args.clients) for j in range(args.requests)}
    )
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
    if args.reference == "local":
        reference = _local_reference(args, seeds)
    else:
        base = Client(args.url, verbose=False)
        reference = {s: base.predict(**_request_kwargs(args, s), api_name="/speculate")["token_ids"] for s in seeds}
    clients = [Client(args.url, verbose=False) for _ in range(args.clients)]  # connect before the clock starts
    lock = threading.Lock()
    barrier = threading.Barrier(args.clients)

    def client(i: int) -> None:
        barrier.wait()
        for j in range(args.requests):
            seed = (i * args.requests + j) % args.distinct + args.seed
            t0 = time.perf_counter()
            try:
                out = clients[i].predict(**_request_kwargs(args, seed), api_name="/speculate")
            except Exception as exc:  # the server's message, e.g. "busy, try again in 30 s"
                with lock:
                    report.errors.append(" ".join(str(exc).split())[:200] or type(exc).__name__)
                continue
            dt = time.perf_counter() - t0
            with lock:
                report.latencies_s.append(dt)
                report.tokens += len(out.get("token_ids", ()))
                report.mismatches += int(list(out.get("token_ids", ())) != reference[seed])
                report.replays += int(bool((out.get("config") or {}).get("replay")))

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(args.clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(args.timeout)
    report.wall_s = time.perf_counter() - t0
    report.rss_after_mb = server_rss_mb(args.url, args.pid)
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
        "| p50 | p95 | throughput | errors | answers != sequential | replayed/followed | server RSS before -> after |",
        "|---:|---:|---:|---:|---:|---:|---|",
        f"| {sec(s['p50_s'])} | {sec(s['p95_s'])} | {s['throughput_req_s'] or 0:.2f} req/s "
        f"({s['throughput_tok_s'] or 0:.1f} tok/s) | {s['errors']} | {s['mismatches']} | {s['replayed_or_followed']} | "
        f"{mb(s['rss_before_mb'])} -> {mb(s['rss_after_mb'])} |",
    ]
    for e in sorted(set(report.errors))[:5]:
        lines.append(f"error x{report.errors.count(e)}: {e}")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m playground loadtest", description=__doc__.split("\n\n")[0])
    p.add_argument("--url", required=True, help="the running app, e.g. http://127.0.0.1:7860")
    p.add_argument("--clients", type=int, default=30)
    p.add_argument("--requests", type=int, default=1, help="requests per client, one after another")
    p.add_argument("--preset", default=None)
    p.add_argument("--drafter", default=None)
    p.add_argument("--prompt", default="The capital of France is")
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
