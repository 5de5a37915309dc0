"""Warming a preset's kernels at start-up (playground.serving.warm, visual.warmup): every verify
size a default run makes, one short run of each mode, and the status says ready only after."""

from __future__ import annotations

from playground.serving import warm
from visual import warmup as vwarmup


def test_the_verify_sizes_cover_every_chain_and_tree_pass():
    assert warm.verify_shapes(8) == [(1, k) for k in range(1, 10)]
    assert warm.verify_shapes(2, tree_nodes=6)[-1] == (1, 7)


def test_warming_runs_each_shape_and_both_modes(tiny_default, monkeypatch):
    seen: dict[str, list] = {"shapes": [], "modes": []}
    real_costs, real_run = warm.pass_costs, warm.api.run

    def costs(model, shapes, **kw):
        seen["shapes"] = list(shapes)
        return real_costs(model, shapes, **kw)

    def run(prompt, settings, **kw):
        seen["modes"].append((settings.mode, kw.get("batch")))
        return real_run(prompt, settings, **kw)

    monkeypatch.setattr(warm, "pass_costs", costs)
    monkeypatch.setattr(warm.api, "run", run)
    said: list[str] = []
    warm.warm_preset("tiny-random", progress=lambda f, m: said.append(m))
    preset = tiny_default.preset("tiny-random")
    assert seen["shapes"] == warm.verify_shapes(preset.gamma, preset.tree_nodes)
    assert seen["modes"] == [("speculative", True), ("autoregressive", True)]  # the app's shared-pass path
    assert said[-1] == "warm"


def test_the_status_says_ready_only_after_the_kernels_are_warm(tiny_default, monkeypatch):
    order: list[str] = []
    monkeypatch.setattr(vwarmup, "warm_preset", lambda *a, **k: order.append("warm"))
    w = vwarmup.Warmup("tiny-random").start()
    list(w.wait("tiny-random", poll_s=0.05))
    order.append("done" if w.done else "not done")
    assert order == ["warm", "done"] and w.error is None and w.message == "models ready"
