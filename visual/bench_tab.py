"""The Benchmark tab: a small live run of ``python -m tools bench`` with the same charts.

    with gr.Tab("Benchmark"):
        build_benchmark_tab(cfg, warmup)      # inside the caller's gr.Blocks

It runs ``tools.bench.iter_bench`` — the CLI's own code — on one or two
prompts, our autoregressive loop, our speculative loop per drafter × γ (× tree
size, for the drafters that can branch) and, if asked, transformers' ``generate()``
and prompt-lookup assisted generation, interleaved.  The handler is a generator: progress while it runs, then the
table, a summary and four figures (``visual.bench``).  Results live only in
the outputs (nothing per user is kept in module globals).  The event shares
the ``"model"`` concurrency group with the Playground, so a benchmark never
runs alongside more generations than the queue allows.
"""

from __future__ import annotations

import math
from typing import Any

import gradio as gr

from playground.config import AppConfig, Preset, load_config
from playground.lab.budget import default_wall_s
from playground.models.loading import ModelUnavailable, availability
from playground.threads import done_computing
from playground.validate import MAX_TREE_NODES
from tools import bench
from visual import bench as vbench
from visual.i18n import L, localized, preset_key, t
from visual.i18n.errors import engine_message

KIND_CHOICES = [(L(f"bench.kind.{k}"), k) for k in ("grounded", "general", "custom")]
GAMMA_CHOICES = [1, 2, 3, 4, 6, 8, 12, 16]
TREE_CHOICES = [1, 4, 8, 16]  # draft-tree node budgets; 1 = chain drafts
MAX_LIVE_PROMPTS = 2
MAX_LIVE_GAMMAS = 4
MAX_LIVE_TREES = 3
MAX_LIVE_TOKENS = 64
EVENT = dict(concurrency_id="model", concurrency_limit="default", api_visibility="private")


def _presets(cfg: AppConfig) -> list[tuple[str, str]]:
    out = []
    for p in cfg.presets:
        try:
            ok, _ = availability(p)
        except Exception:
            ok = False
        if ok:
            out.append((L(preset_key(p.name)), p.name))
    return out


def _int(x: Any, name: str, lo: int, hi: int) -> int:
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise gr.Error(t("bench.err.whole", name=name)) from None
    if not math.isfinite(v) or not v.is_integer() or not lo <= v <= hi:
        raise gr.Error(t("bench.err.range", name=name, lo=lo, hi=hi))
    return int(v)


def _tree_sizes(tree_nodes, drafters: list[str]) -> tuple[int, ...]:
    """The picked tree sizes, ascending (1 = chain); raises gr.Error when they cannot run."""
    try:
        sizes = sorted({int(n) for n in (tree_nodes if tree_nodes is not None else [1])})
    except (TypeError, ValueError):
        raise gr.Error(t("bench.err.tree_whole")) from None
    if not sizes:
        raise gr.Error(t("bench.err.tree_none"))
    if len(sizes) > MAX_LIVE_TREES:
        raise gr.Error(t("bench.err.tree_many", n=MAX_LIVE_TREES))
    if any(not 1 <= n <= MAX_TREE_NODES for n in sizes):
        raise gr.Error(t("bench.err.tree_range", n=MAX_TREE_NODES))
    if any(n > 1 for n in sizes) and not any(d in bench.BRANCHING for d in drafters):
        raise gr.Error(t("bench.err.tree_branch", drafters=", ".join(bench.BRANCHING)))
    return tuple(sizes)


def live_options(
    preset,
    kind,
    custom_prompt,
    drafters,
    gammas,
    max_new_tokens,
    temperature,
    with_hf,
    repeats,
    tree_nodes=(1,),
    cfg: AppConfig | None = None,
) -> bench.BenchOptions:
    """Validate the tab's inputs into BenchOptions (raises gr.Error with a clear message)."""
    cfg = cfg or load_config()
    try:
        p = cfg.preset(preset)
    except KeyError as exc:
        raise gr.Error(str(exc.args[0])) from None
    if kind == "custom":
        text = (custom_prompt or "").strip()
        if not text:
            raise gr.Error(t("bench.err.no_prompt"))
        if len(text) > cfg.limits.max_prompt_chars:
            raise gr.Error(t("bench.err.long", n=len(text), limit=cfg.limits.max_prompt_chars))
        prompts = (bench.BenchPrompt("your-prompt", "custom", text),)
    else:
        prompts = tuple(x for x in bench.load_prompts() if x.kind == kind)[:MAX_LIVE_PROMPTS]
        if not prompts:
            raise gr.Error(t("bench.err.no_set", kind=kind))
    drafters = [d for d in (drafters or []) if d in p.drafters]
    if not drafters:
        raise gr.Error(t("bench.err.drafter", drafters=", ".join(p.drafters)))
    try:
        gs = sorted({int(g) for g in (gammas or [])})
    except (TypeError, ValueError):
        raise gr.Error(t("bench.err.gamma_whole")) from None
    if not gs:
        raise gr.Error(t("bench.err.gamma_none"))
    if len(gs) > MAX_LIVE_GAMMAS:
        raise gr.Error(t("bench.err.gamma_many", n=MAX_LIVE_GAMMAS))
    trees = _tree_sizes(tree_nodes, drafters)
    try:
        temp = float(temperature)
    except (TypeError, ValueError):
        raise gr.Error(t("bench.err.temperature")) from None
    methods = ["autoregressive", "speculative"] + (["hf_generate", "hf_assisted"] if with_hf else [])
    return bench.BenchOptions(
        preset=p.name,
        prompts=prompts,
        max_new_tokens=_int(max_new_tokens, t("bench.name.new_tokens"), 4, MAX_LIVE_TOKENS),
        gammas=tuple(gs),
        tree_nodes=trees,
        temperatures=(temp,),
        drafters=tuple(drafters),
        methods=tuple(m for m in bench.METHODS if m in methods),
        repeats=_int(repeats, t("bench.name.repeats"), 1, 3),
        cost_reps=3,
        # a live run on real models stops after limits.lab_wall_s and shows the complete rounds it has
        wall_s=default_wall_s(p, cfg),
    )


def cli_command(opts: bench.BenchOptions) -> str:
    parts = [
        "python -m tools bench",
        f"--preset {opts.preset}",
        f"--max-new-tokens {opts.max_new_tokens}",
        "--gammas " + ",".join(str(g) for g in opts.gammas),
        "--temperatures " + ",".join(f"{t:g}" for t in opts.temperatures),
        "--methods " + ",".join(opts.methods),
        f"--repeats {opts.repeats}",
    ]
    if opts.drafters:
        parts.append("--drafters " + ",".join(opts.drafters))
    if tuple(opts.tree_nodes) != (1,):
        parts.append("--tree-nodes " + ",".join(str(n) for n in opts.tree_nodes))
    kinds = sorted({p.kind for p in opts.prompts or ()})
    if kinds and kinds != ["custom"]:
        parts.append("--kinds " + ",".join(kinds))
    return " ".join(parts)


def _empty_figs() -> list:
    figs = vbench.bench_figures([])
    return [figs[k] for k in ("throughput", "speedup", "acceptance", "costs")]


def run_live(
    preset,
    kind,
    custom_prompt,
    drafters,
    gammas,
    max_new_tokens,
    temperature,
    with_hf,
    repeats,
    tree_nodes=(1,),
    progress=gr.Progress(),
):
    """Generator handler: (status, summary, table, 4 figures) updates."""
    opts = live_options(
        preset, kind, custom_prompt, drafters, gammas, max_new_tokens, temperature, with_hf, repeats, tree_nodes
    )
    skip = [gr.skip()] * 6
    yield [t("bench.starting", command=cli_command(opts))] + skip
    report = None
    try:
        for item in bench.iter_bench(opts):
            # gradio may run the next step in another of its worker threads, which live on: this
            # one gives back its OpenMP helpers, or they would slow every later run (playground.threads).
            done_computing()
            if isinstance(item, bench.Progress):
                frac = item.done / item.total if item.total else 0.0
                try:
                    progress(frac, desc=item.label)
                except Exception:
                    pass
                yield [t("bench.running", done=item.done, total=item.total, label=item.label)] + skip
            else:
                report = item
    except (bench.BenchError, ValueError, ModelUnavailable) as exc:
        raise gr.Error(engine_message(exc)) from None
    except Exception as exc:  # keep serving; say what happened
        raise gr.Error(t("bench.failed", error=f"{type(exc).__name__}: {exc}")) from None
    finally:
        done_computing()
    assert report is not None
    figs = vbench.bench_figures(report.rows)
    notes = "".join("\n\n" + t("bench.note", note=n) for n in report.meta.get("notes", []))
    if report.meta.get("partial"):
        notes += "\n\n" + t("bench.partial", partial=report.meta["partial"])
    yield [
        t("bench.done", n=len(report.runs), command=cli_command(opts)) + notes,
        vbench.summary_markdown(report.rows, report.meta),
        vbench.bench_table(report.rows),
        figs["throughput"],
        figs["speedup"],
        figs["acceptance"],
        figs["costs"],
    ]


def _drafter_update(preset: str, cfg: AppConfig):
    try:
        p = cfg.preset(preset)
    except KeyError:
        return gr.update()
    value = list(p.drafters)[:1]  # the preset's own drafter
    return gr.update(choices=list(p.drafters), value=value)


def build_benchmark_tab(cfg: AppConfig | None = None, warmup=None) -> dict[str, Any]:
    """Create the Benchmark components and events inside the current Blocks/Tab context."""
    cfg = cfg or load_config()
    presets = _presets(cfg)
    names = [n for _, n in presets]
    default = cfg.default_preset if cfg.default_preset in names else (names[0] if names else cfg.default_preset)
    p0 = cfg.preset(default)
    c: dict[str, Any] = {}
    gr.Markdown(L("bench.intro"))
    _settings_inputs(c, presets, default, p0)
    _result_outputs(c)
    _wire_events(c, cfg)
    return c


def _settings_inputs(c: dict[str, Any], presets: list[tuple[str, str]], default: str, p0: Preset) -> None:
    """The run's settings (preset, prompts, drafters, γ, tree sizes, length, temperature, repeats), into ``c``."""
    with gr.Row():
        c["preset"] = gr.Dropdown(presets or [(default, default)], value=default, label=L("bench.preset"))
        c["kind"] = gr.Radio(KIND_CHOICES, value="grounded", label=L("bench.kind"))
    c["custom"] = gr.Textbox(label=L("bench.custom"), lines=3, visible=False, placeholder=L("bench.custom.placeholder"))
    with gr.Row():
        c["drafters"] = gr.CheckboxGroup(list(p0.drafters), value=list(p0.drafters)[:1], label=L("bench.drafters"))
        c["gammas"] = gr.CheckboxGroup(GAMMA_CHOICES, value=[2, 4, 8], label=L("bench.gammas"))
        c["tree_nodes"] = gr.CheckboxGroup(
            TREE_CHOICES,
            value=[1],
            label=L("bench.trees"),
            info=L("bench.trees.info"),
        )
    with gr.Row():
        c["max_new"] = gr.Slider(4, MAX_LIVE_TOKENS, value=32, step=1, label=L("bench.max_new"))
        c["temperature"] = gr.Radio([0.0, 0.7, 1.0], value=0.0, label=L("bench.temperature"))
        c["repeats"] = gr.Slider(1, 3, value=1, step=1, label=L("bench.repeats"))
        c["with_hf"] = gr.Checkbox(value=True, label=L("bench.with_hf"))


def _result_outputs(c: dict[str, Any]) -> None:
    """The Run button and what a run fills in: status, summary, table, the four figures, the help."""
    c["run"] = gr.Button(L("bench.run"), variant="primary")
    c["status"] = gr.Markdown("")
    c["summary"] = gr.Markdown("")
    c["table"] = gr.Dataframe(
        vbench.bench_table([]),
        label=L("bench.table"),
        interactive=False,
        wrap=True,
    )
    figs = _empty_figs()
    with gr.Row():
        c["fig_throughput"] = gr.Plot(figs[0], show_label=False)
        c["fig_speedup"] = gr.Plot(figs[1], show_label=False)
    with gr.Row():
        c["fig_acceptance"] = gr.Plot(figs[2], show_label=False)
        c["fig_costs"] = gr.Plot(figs[3], show_label=False)
    with gr.Accordion(L("bench.help"), open=False):
        gr.Markdown(L("bench.metric_help"))


def _wire_events(c: dict[str, Any], cfg: AppConfig) -> None:
    """The tab's events: the prompt kind shows the custom box, the preset sets the drafters, Run runs."""
    c["kind"].change(
        lambda k: gr.update(visible=k == "custom"),
        c["kind"],
        c["custom"],
        api_visibility="private",
        concurrency_limit=None,
        show_progress="hidden",
    )
    c["preset"].change(
        lambda p: _drafter_update(p, cfg),
        c["preset"],
        c["drafters"],
        api_visibility="private",
        concurrency_limit=None,
        show_progress="hidden",
    )
    c["run"].click(
        localized(run_live),
        [
            c["preset"],
            c["kind"],
            c["custom"],
            c["drafters"],
            c["gammas"],
            c["max_new"],
            c["temperature"],
            c["with_hf"],
            c["repeats"],
            c["tree_nodes"],
        ],
        [
            c["status"],
            c["summary"],
            c["table"],
            c["fig_throughput"],
            c["fig_speedup"],
            c["fig_acceptance"],
            c["fig_costs"],
        ],
        **EVENT,
    )
