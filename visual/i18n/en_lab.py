"""English messages, part 3: the Classroom lab, the serving lesson and the Benchmark tab
(merged into ``visual.i18n.en.MESSAGES``)."""

MESSAGES: dict[str, str] = {}

# ---- the Classroom lab (visual/lab_tab.py, visual/lab_tabs/*) and the serving lesson (visual/serving.py)
MESSAGES.update(
    {
        "lab.preset": "Preset",
        "lab.temperature": "Temperature",
        "lab.seed": "Seed",
        "lab.new_tokens": "New tokens",
        "lab.prompt": "Prompt",
        "lab.stop": "■ Stop",
        "lab.stopping": "Stopping…",
        "lab.failed": "The lab run failed: {error}",
        "lab.whole": "{name} must be a whole number.",
        "lab.whole.got": "{name} must be a whole number, got {value}.",
        "lab.name.seed": "seed",
        "lab.name.tokens": "tokens",
        "lab.name.n": "N",
        "lab.name.tokens_per": "tokens per continuation",
        # equality
        "lab.eq.tab": "Equality check (greedy)",
        "lab.eq.intro": (
            "At temperature 0 speculative decoding must reproduce the target's own greedy output **token for "
            "token**. Run both and compare. In float32 they are identical; in bfloat16 a 1-token pass and a "
            "multi-token verify pass can round a near-tie differently, and the first such flip is shown with "
            "both tokens' logits."
        ),
        "lab.eq.run": "Run both ▸",
        # distribution
        "lab.d.tab": "Distribution check & wrong rules",
        "lab.d.intro": (
            "Draw **N** short continuations with speculative sampling and with the target alone, and compare "
            "the histograms. The correct rule matches the target up to noise; the rules marked ✗ WRONG are bugs "
            "real implementations shipped — watch them drift. ~ LOSSY trades drift for acceptance (its edge "
            "shows best with 3 tokens per continuation: compare *tokens/pass* with the correct rule's). "
            "Use **tiny-random** for large N (5,000 takes seconds). Real models draw tens of continuations a "
            "second on a 2-core CPU (many at once, sharing each target pass) and allow N ≤ {n_slow}; on them "
            "a check stops after {wall} s and shows what it collected, marked partial (**■ Stop** ends it "
            "sooner)."
        ),
        "lab.d.rule": "Verification rule",
        "lab.d.rule.info": "The correct rule is the default; the others are labelled.",
        "lab.d.rule.lossless": "✓ Correct: lossless speculative sampling",
        "lab.d.rule.block": "✓ Correct: block verification — the drafts judged jointly (Sun et al., ICLR 2025)",
        "lab.d.rule.softmax-q": "✗ WRONG (a): argmax drafts checked against the drafter's softmax q — transformers #32867",
        "lab.d.rule.exact-match": "≈ Wasteful (b): exact-match acceptance at T > 0 — lossless, but rejects good drafts",
        "lab.d.rule.target-sample": "✗ WRONG (c): on rejection emit a plain target sample instead of the residual",
        "lab.d.rule.bonus-wrong-position": "✗ WRONG (d): bonus token drawn from the wrong position (γ instead of γ+1)",
        "lab.d.rule.typical": "~ LOSSY but faster: Medusa typical acceptance",
        "lab.d.n": "N continuations per side",
        "lab.d.tokens": "Tokens per continuation",
        "lab.d.run": "Run check ▸",
        "lab.d.all": "Compare all rules",
        "lab.d.table": "Rules checked this session (newest first)",
        "lab.d.help": (
            "**TV distance** = ½ Σ |f_spec(x) − f_target(x)|: 0 = identical histograms, 1 = no overlap; two "
            "samples of the same distribution still differ by about the *noise level* shown. **p-value**: how "
            "often a difference at least this large would appear if both came from the same distribution "
            "(chi-square test, rare outcomes pooled). **p vs exact**: the speculative sample against the "
            "target's exact probabilities (computed from its logits). **Acceptance** = accepted ÷ judged drafts."
        ),
        "lab.d.stopped": "Stopped: nothing new was computed.",
        "lab.d.done": "Done in {seconds} s.",
        "lab.d.partial": (
            "Stopped at the time limit after {seconds} s: {done} of {total} continuations — a partial result, "
            "labelled as such."
        ),
        "lab.d.all_done": "All rules checked on the same settings: compare drift (p-value, TV) with acceptance in the table.",
        "lab.d.all_stopped": "Stopped after {seconds} s (time limit {limit}): {done} of {total} rules checked",
        "lab.d.not_checked": ", not checked: {rules}",
        "lab.d.partial_rows": "; rows marked partial are computed on fewer continuations than asked.",
        "lab.d.progress": "rule {i}/{n} ({rule}): {message}",
        # theory
        "lab.t.tab": "Theory bench",
        "lab.t.alpha": "α: acceptance probability",
        "lab.t.gamma": "γ: drafts per step",
        "lab.t.c": "c: draft cost ÷ target cost",
        "lab.t.v": "v_γ: verify-pass cost ÷ 1-token cost",
        "lab.t.here": "You are here: measure a real run",
        "lab.t.measure": "Measure (target alone + speculative, γ from the slider) ▸",
        "lab.t.from_trace": "Use the trace from Replay & share",
        "lab.t.no_trace": "No trace yet: run or import one in the Replay & share tab.",
        # predict
        "lab.p.tab": "Predict, then reveal",
        "lab.p.intro": (
            "Guess before you look. **Before the run**, guess its acceptance rate. **At each step**, the drafts "
            "are shown with the drafter's confidence q: tick the ones the target will accept, then reveal p, "
            "min(1, p/q), the random u and the verdict. Your score is kept for this session."
        ),
        "lab.p.rate": "Your guess: acceptance rate of the run (%)",
        "lab.p.new": "New round ▸",
        "lab.p.guess": "Which drafts will the target accept?",
        "lab.p.reveal": "Reveal",
        "lab.p.next": "Next step ›",
        "lab.p.rate_reveal": "Reveal the run's acceptance rate",
        "lab.p.over": (
            "This run is over. Press <b>Reveal the run's acceptance rate</b> to score your guess, or start a "
            "<b>New round</b>."
        ),
        "lab.p.new_run": (
            "New run: {k} step(s) with drafts out of {n}. Your acceptance-rate guess ({guess}%) is locked in."
        ),
        "lab.p.no_drafts": "This run drafted nothing (prompt lookup found no match?): try another prompt or preset.",
        "lab.p.already": "Already revealed: press Next step.",
        "lab.p.start_first": "Start a round first.",
        "lab.p.rate_again": "Acceptance rate of this run: {actual} (already scored).",
        "lab.p.rate_scored": (
            "Acceptance rate of this run: {actual} (you guessed {guess}); it drafted {drafted} tokens in {steps} steps."
        ),
        # replay & share
        "lab.r.tab": "Replay & share",
        "lab.r.intro": (
            "Step backwards and forwards through a recorded run, import a trace JSON exported earlier "
            "(checked: size, JSON, schema, values — nothing in it is executed), and hand out a link that "
            "pre-fills the settings."
        ),
        "lab.r.classroom": "Classroom presets",
        "lab.r.apply": "Apply preset",
        "lab.r.run": "Run ▸",
        "lab.r.file": "Import a trace JSON (≤ {mb} MB)",
        "lab.r.back": "◀ Back",
        "lab.r.frame": "Frame",
        "lab.r.fwd": "Step ▶",
        "lab.r.export": "⬇ Export this trace (JSON)",
        "lab.r.share_btn": "Make a share link",
        "lab.r.share": "Share link (settings above)",
        "lab.r.fresh": "Fresh run:",
        "lab.r.generated": "Generated. Step through it with ◀ ▶ or the slider.",
        "lab.r.refused": "⛔ Could not import this file: {reason}.",
        "lab.r.refused_kind": "⛔ Could not import this file ({kind}).",
        "lab.r.imported_from": "Imported {name}:",
        "lab.r.imported": "Imported a trace with {n} steps.",
        "lab.r.nothing": "Nothing to export yet.",
        "lab.r.unknown_classroom": "Unknown classroom preset.",
        # serving a class
        "lab.sv.tab": "Serving a class",
        "lab.sv.measure": "Measure the pass cost on this server now (≈ 30 s) ▸",
        "sv.lesson": (
            "### Serving a class: batching and speculation\n\n"
            "A target pass over a few tokens is **memory-bound** on this CPU: reading 270 M weights costs\n"
            "about the same whether the pass carries one token or a few dozen.  So when thirty students\n"
            "press Run, the server does not run thirty decoding loops one after another: every run keeps\n"
            "its own cache, drafts and random stream, but their next target passes are **one forward\n"
            "pass** (continuous batching, as vLLM, SGLang and TGI do).  Each row sees only its own keys.\n\n"
            "Past the knee, the pass is **compute-bound**: every extra token costs real time, and a\n"
            "rejected draft is pure waste.  Alone, speculation turns idle compute into tokens; under\n"
            "load there is no idle compute left, and plain decoding of many rows wins.  That is why\n"
            "servers turn speculation **down** as load grows: this one shares a budget of row-tokens per\n"
            "pass between the runs (draft cap = knee ÷ runs − 1), so at full load a run decodes plainly.\n"
            "At temperature 0 the output never changes, only the speed.\n\n"
            "How soon the knee comes depends on the CPU.  With AVX-512 BF16 (or AMX) a bfloat16 pass of 9\n"
            "tokens cost 1.05–1.4 passes of one; with AVX2 only, about 2 (products of several rows run in\n"
            "float32 there), so speculation gains less even alone.  The button below measures this server.\n\n"
            "Where the measurement has it, the dashed line is the machine's **ceiling**, measured in the\n"
            "same run: plain decoding through passes of that many rows and nothing else.  The table gives\n"
            "each class's throughput as a share of it: what the scheduler, each run's sampling and the\n"
            "queue leave on the table."
        ),
        "sv.variant.speculative, capped": "speculative, capped",
        "sv.variant.speculative": "speculative",
        "sv.variant.autoregressive": "autoregressive",
        "sv.hover.class": "%{x} runs at once<br>%{y:.1f} tokens/s for the class",
        "sv.runs": "runs at once",
        "sv.class_tps": "tokens/s for the class",
        "sv.throughput.title": "A class at once: throughput by runs sharing each pass",
        "sv.one_pass": "one shared pass",
        "sv.rows_tokens": "{rows} rows × {tokens} tokens",
        "sv.hover.cost": "%{text}<br>%{y:.2f} × a 1-token pass",
        "sv.cost.x": "row-tokens in the pass (rows × tokens each)",
        "sv.cost.y": "cost ÷ one 1-token pass",
        "sv.cost.title": "What one shared target pass costs",
        "sv.none": "No measurement yet.",
        "sv.measured_now": "Measured just now on this server",
        "sv.measured": "Measured",
        "sv.reproduce": "Reproduce:",
        "sv.col.runs": "runs at once",
        "sv.col.variant": "variant",
        "sv.col.tps": "class tokens/s",
        "sv.col.p50": "p50 s",
        "sv.col.p95": "p95 s",
        "sv.col.per_pass": "runs per pass",
        "sv.split": "{model} · {own} · {wait}",
        "sv.col.split": "ms per shared pass: model · scheduler · wait",
        "sv.ceiling": "ceiling",
        "sv.hover.ceiling": "ceiling: plain decoding, %{x} rows per pass and nothing else<br>%{y:.1f} tokens/s",
        "sv.share": "{share} of {ceiling}",
        "sv.col.of_ceiling": "share of the ceiling (tokens/s)",
    }
)

# ---- the Benchmark tab (visual/bench_tab.py, visual/bench.py)
MESSAGES.update(
    {
        "bench.intro": (
            "### Benchmark on this machine\n"
            "Times our decoding loop against `transformers`' own `generate()` and its prompt-lookup assisted "
            "generation, on the same prompts and models, interleaved so machine drift hits every method alike. "
            "A live run is small (a minute or two); the command line runs the full version: "
            "`python -m tools bench`."
        ),
        "bench.preset": "Preset",
        "bench.kind": "Prompts",
        "bench.kind.grounded": "Input-grounded (edit / copy / summarise a given text)",
        "bench.kind.general": "General (open-ended)",
        "bench.kind.custom": "My own prompt",
        "bench.custom": "Your prompt",
        "bench.custom.placeholder": "e.g. paste a paragraph and ask for it corrected",
        "bench.drafters": "Drafters",
        "bench.gammas": "Block sizes γ (at most 4)",
        "bench.trees": "Tree nodes (1 = chain; at most 3)",
        "bench.trees.info": (
            "Above 1: the drafter proposes a tree of that many nodes, all verified in one target pass; γ bounds its depth."
        ),
        "bench.max_new": "New tokens per run",
        "bench.temperature": "Temperature",
        "bench.repeats": "Repetitions",
        "bench.with_hf": "Include transformers generate() and assisted generation",
        "bench.run": "Run benchmark",
        "bench.table": "block size / tree size → latency, throughput, acceptance rate, quality",
        "bench.help": "What the numbers mean",
        "bench.starting": "Starting… (`{command}` runs the same code)",
        "bench.running": "Running {done}/{total}: {label}",
        "bench.failed": "The benchmark failed: {error}",
        "bench.note": "Note: {note}",
        "bench.partial": "**Partial result:** {partial} (`limits.lab_wall_s`); the rows use those rounds only.",
        "bench.done": "Done: {n} measured runs. Reproduce on the command line: `{command}`",
        "bench.err.whole": "{name} must be a whole number.",
        "bench.err.range": "{name} must be a whole number between {lo} and {hi}.",
        "bench.err.tree_whole": "Tree sizes must be whole numbers.",
        "bench.err.tree_none": "Pick at least one tree size (1 = chain drafts).",
        "bench.err.tree_many": "Pick at most {n} tree sizes for a live run (the CLI takes more).",
        "bench.err.tree_range": "Tree sizes must be between 1 (a chain) and {n} nodes.",
        "bench.err.tree_branch": "Trees need a drafter that can branch ({drafters}); pick one, or tree size 1 only.",
        "bench.err.no_prompt": "Type a prompt, or pick one of the prompt sets.",
        "bench.err.long": "The prompt is too long ({n} characters, limit {limit}).",
        "bench.err.no_set": "No {kind} prompts in the default prompt set.",
        "bench.err.drafter": "Pick at least one drafter this preset has: {drafters}.",
        "bench.err.gamma_whole": "γ values must be whole numbers.",
        "bench.err.gamma_none": "Pick at least one block size γ.",
        "bench.err.gamma_many": "Pick at most {n} block sizes for a live run (the CLI takes more).",
        "bench.err.temperature": "Temperature must be a number.",
        "bench.name.new_tokens": "New tokens",
        "bench.name.repeats": "Repetitions",
    }
)

# ---- the Benchmark's charts, table and summary (visual/bench.py)
MESSAGES.update(
    {
        "bench.fig.throughput": "Throughput by block size γ (tokens/s)",
        "bench.fig.speedup": "Decode speedup vs our autoregressive loop: measured vs predicted",
        "bench.fig.acceptance": "Acceptance by draft position",
        "bench.fig.costs": "Cost of one step, in single-token target passes (γ·c + v_γ)",
        "bench.axis.gamma_drafts": "block size γ (drafts per step)",
        "bench.axis.tps": "tokens / s",
        "bench.axis.gamma": "block size γ",
        "bench.axis.speedup": "speedup (×)",
        "bench.axis.position": "draft position",
        "bench.axis.acceptance": "acceptance",
        "bench.axis.cost": "× one single-token target pass",
        "bench.axis.ar": "autoregressive",
        "bench.trace.ours": "ours",
        "bench.trace.hf_assisted": "HF assisted",
        "bench.trace.tree": "tree",
        "bench.trace.measured": "measured",
        "bench.trace.predicted": "predicted",
        "bench.trace.step_mix": "predicted from step mix",
        "bench.trace.v": "v_γ (target pass over γ+1 tokens)",
        "bench.method.speculative": "speculative",
        "bench.method.autoregressive": "autoregressive",
        "bench.method.hf_generate": "hf_generate",
        "bench.method.hf_assisted": "hf_assisted",
        "bench.col.prompts": "prompts",
        "bench.col.temperature": "T",
        "bench.col.dtype": "dtype",
        "bench.col.trace": "trace",
        "bench.col.method": "method",
        "bench.col.drafter": "drafter",
        "bench.col.gamma": "block size γ",
        "bench.col.tree_nodes": "tree nodes",
        "bench.col.ms_per_token": "latency (ms/token)",
        "bench.col.tokens_per_s": "throughput (tokens/s)",
        "bench.col.ceiling_tokens_per_s": "ceiling (tokens/s)",
        "bench.col.of_ceiling": "of ceiling",
        "bench.col.speedup_vs_autoregressive": "speedup vs ours AR",
        "bench.col.speedup_vs_hf_generate": "speedup vs HF generate",
        "bench.col.acceptance_rate": "acceptance rate",
        "bench.col.tokens_per_target_call": "tokens / target call",
        "bench.col.c": "c",
        "bench.col.v": "v_γ",
        "bench.col.predicted_speedup": "predicted",
        "bench.col.predicted_speedup_steps": "predicted (step mix)",
        "bench.col.mean_accepted_length": "mean accepted",
        "bench.col.repeated_4gram_share": "repeated 4-grams",
        "bench.col.distinct_2": "distinct-2",
        "bench.col.repetitive_runs": "repetitive runs",
        "bench.col.speedup_non_repetitive": "speedup, non-repetitive",
        "bench.col.speedup_repetitive": "speedup, repetitive",
        "bench.col.draft_stop": "stop below",
        "bench.col.nodes_per_pass": "nodes / pass",
        "bench.col.speedup_vs_chain": "speedup vs chain",
        "bench.col.v_measured": "v in runs",
        "bench.col.quality": "quality",
        "bench.metric_help": (
            "**latency** = wall time per new token, prefill included · **throughput** = tokens/s · "
            "**acceptance rate** = accepted drafts / drafts the target judged (drafts after the first rejection are "
            "never judged) · **tokens / target call** = new tokens per decode-phase target pass · "
            "**c** = drafter ms per drafted token ÷ one single-token target pass · "
            "**v_γ** = one target pass over γ+1 tokens ÷ one over 1 token, timed back to back at the same cache length · "
            "**predicted** = E(α, γ) / (γ·c + v_γ) with E = (1 − α^(γ+1)) / (1 − α) and the measured α · "
            "**quality** = token-identical to `transformers` `generate()` for greedy rows · "
            "**repeated 4-grams** = share of output tokens that complete a 4-gram already in the prompt or earlier in the "
            "output · **distinct-2** = distinct bigrams / bigrams of the output · a run is **repetitive** when at least "
            "50% of its tokens repeat · **speedup, non-repetitive / repetitive** = our autoregressive loop's "
            "ms/token on the same prompts ÷ this row's, over those runs only (a base model loops when greedy, and copying "
            "a loop is nearly free, so judge a drafter on the non-repetitive column)."
        ),
        "bench.sum.end": ".",
        "bench.sum.none": "No results yet.",
        "bench.sum.tree": ", tree of {n} nodes",
        "bench.sum.fastest": (
            "Fastest: **{drafter} at γ={gamma}{tree}** on {prompts} prompts — {tps} tokens/s, **{speedup}×** our "
            "autoregressive loop"
        ),
        "bench.sum.vs_hf": ", {x}× `transformers` `generate()`",
        "bench.sum.acceptance": "; acceptance {rate}",
        "bench.sum.predicted": "; predicted {x}×",
        "bench.sum.plain": (
            "On non-repetitive outputs the fastest is **{drafter} at γ={gamma}** (T={temperature}): **{speedup}×** our "
            "autoregressive loop"
        ),
        "bench.sum.against_rep": ", against {x}× on its repetitive outputs",
        "bench.sum.rep_runs": " ({k} of {n} runs repetitive).",
        "bench.sum.ar": "Our autoregressive loop runs at {x}× `generate()`'s speed ({prompts} prompts, T={temperature}).",
        "bench.sum.v": "Measured v_γ: {values}.",
        "bench.sum.trees": "Draft trees: {items} (v: one target pass over the root and the nodes ÷ one single-token pass).",
        "bench.sum.tree_item": "{drafter} γ={gamma} tree {nodes}: {per_pass} nodes per pass",
        "bench.sum.tree_vs_chain": ", {x}× the chain",
        "bench.sum.machine": (
            "Machine: {cpu}, {threads} torch threads, load {load}; timings on a shared CPU are noisy — methods were "
            "interleaved so drift hits them alike."
        ),
        "bench.prompts.grounded": "grounded",
        "bench.prompts.general": "general",
        "bench.prompts.custom": "custom",
    }
)

# ---- the lab's renderers (visual/lab.py)
MESSAGES.update(
    {
        "vlab.stopped": "Stopped: {what} was cancelled before it finished; nothing new to show.",
        "vlab.what.equality": "the equality check",
        "vlab.partial": "Partial result.",
        "vlab.badge.correct": "✓ correct",
        "vlab.badge.wrong": "✗ WRONG",
        "vlab.badge.wasteful": "≈ lossless, wasteful",
        "vlab.badge.lossy": "~ lossy",
        "vlab.d.title": "Continuations: speculative vs target alone",
        "vlab.d.empty": "Press Run check to draw the histograms.",
        "vlab.d.target": "target alone (N = {n})",
        "vlab.d.hover_target": "%{x}<br>target alone: %{y:.4f}",
        "vlab.d.spec": "speculative · {rule}",
        "vlab.d.spec_partial": " (N = {n}, partial)",
        "vlab.d.hover_spec": "%{x}<br>speculative: %{y:.4f}",
        "vlab.d.exact": "target, exact probability",
        "vlab.d.hover_exact": "%{x}<br>exact: %{y:.4f}",
        "vlab.d.x1": "continuation (1 token)",
        "vlab.d.xn": "continuation ({n} tokens, · between tokens)",
        "vlab.d.y": "frequency",
        "vlab.d.partial_title": " — PARTIAL (time limit)",
        "vlab.d.choose": "Choose a rule and press <b>Run check</b>.",
        "vlab.d.tv": "TV distance",
        "vlab.d.noise": "noise level ≈ {x}",
        "vlab.d.p": "chi-square p-value",
        "vlab.d.p_hint": "two samples · {bins} bins",
        "vlab.d.p_exact": "p vs exact target",
        "vlab.d.bins": "{bins} bins",
        "vlab.d.acceptance": "acceptance rate",
        "vlab.d.acceptance_hint": "accepted / judged drafts",
        "vlab.d.tpp": "tokens per target pass",
        "vlab.d.tpp_hint": "target alone: 1",
        "vlab.d.time": "time",
        "vlab.d.time_hint": "{n} × 2 continuations",
        "vlab.d.time_partial": "{spec} + {target} of {n} × 2 continuations",
        "vlab.d.note": "Note: {note}",
        "vlab.d.settings": "{preset} · {drafter} drafter · T = {t} · γ = {gamma} · {n}-token continuations · seed {seed}",
        "vlab.d.argmax": " · argmax drafts",
        "vlab.d.reading": "Reading:",
        "vlab.d.expected": "Expected for this rule: {expect}",
        "vlab.col.rule": "rule",
        "vlab.col.kind": "kind",
        "vlab.col.N": "N",
        "vlab.col.TV": "TV",
        "vlab.col.noise TV": "noise TV",
        "vlab.col.p-value": "p-value",
        "vlab.col.p vs exact": "p vs exact",
        "vlab.col.acceptance": "acceptance",
        "vlab.col.tokens/pass": "tokens/pass",
        "vlab.col.vs correct": "vs correct",
        "vlab.col.verdict": "verdict",
        "vlab.verdict.drift": "drift detected",
        "vlab.verdict.unclear": "unclear",
        "vlab.verdict.none": "no drift detected",
        "vlab.verdict.partial": " (partial sample)",
        "vlab.n_partial": "{n} of {total} (partial)",
        "vlab.eq.empty": "Press <b>Run both</b> to compare target-only and speculative greedy decoding.",
        "vlab.eq.identical": "✓ identical",
        "vlab.eq.diverged": "≠ diverged",
        "vlab.eq.token": "token {i}",
        "vlab.eq.same": "same in both",
        "vlab.eq.tip_ar": "target alone: {text} (id {id})",
        "vlab.eq.tip_spec": "speculative: {text} (id {id})",
        "vlab.eq.legend": "Each chip is one token. Matching tokens show once; from the first difference on, the top chip is target-alone greedy and the bottom chip is speculative greedy.",
        "vlab.eq.aria": "token-by-token comparison",
        "vlab.eq.first": "First divergence: token {i}",
        "vlab.eq.by": "logits as computed by",
        "vlab.eq.alone": "(target alone)",
        "vlab.eq.spec": "(speculative)",
        "vlab.eq.gap": "gap",
        "vlab.eq.row_ar": "target alone · 1-token pass",
        "vlab.eq.row_spec": "speculative · {rows}-token verify pass",
        "vlab.eq.stats": "{preset} · {drafter} drafter · {dtype} · γ = {gamma} · target passes: {ar} alone vs {spec} speculative · acceptance {rate}",
        "vlab.t.formulas": "\n**Expected tokens per step** with γ drafts, each accepted with probability α (independently):\n$${e_tex}$$\n**Predicted speedup** over the target alone, in units of one single-token target pass:\n$${s_tex}$$\n*c* = cost of one draft token ÷ cost of one target pass over 1 token; *v*<sub>γ</sub> = cost of one target pass over\nγ+1 tokens ÷ cost of a pass over 1 token (≈ 1 on a GPU, 1.3–2 on a CPU). Speculation pays off only where S > 1.\n",
        "vlab.t.S": "predicted speedup S",
        "vlab.t.E": "tokens per step E",
        "vlab.t.best": "best γ = {gamma}",
        "vlab.t.best_text": "best γ = {gamma}: {speedup}×",
        "vlab.t.break_even": "break-even (S = 1)",
        "vlab.t.how.measured": "measured",
        "vlab.t.how.sliders": "measured α, c and v_γ from the sliders",
        "vlab.t.how.predicted": "predicted from measured α, c, v_γ",
        "vlab.t.here": "you are here",
        "vlab.t.here_how": "you are here ({how})",
        "vlab.t.y2": "E (tokens per step)",
        "vlab.t.x": "γ (drafts per step)",
        "vlab.t.y": "S (× speed of the target alone)",
        "vlab.t.E_at": "E at γ = {gamma}",
        "vlab.t.tps": "tokens per step",
        "vlab.t.S_at": "S at γ = {gamma}",
        "vlab.t.predicted": "predicted",
        "vlab.t.best_tile": "best γ",
        "vlab.t.pays": "With these numbers speculation pays off: best at γ = {gamma} ({speedup}).",
        "vlab.t.slower": "With these numbers speculation is SLOWER than the target alone at every γ: drafts are too costly (c, v_γ) for how often they are accepted (α).",
        "vlab.t.measured": "Measured run: α = {alpha}, c = {c}, v<sub>γ</sub> = {v}, γ = {gamma}, mean accepted drafts per step = {mean}; predicted S = {predicted}, measured S = {measured}.",
        "vlab.t.no_single": "This trace has no single-token target pass to time against, so c and v<sub>γ</sub> could not be measured from it: the point uses the measured α with the sliders' c and v<sub>γ</sub>. Use <b>Measure</b> for a full measurement.",
        "vlab.t.alpha_note": "α here is the fraction of judged drafts that were accepted; the formula assumes every draft is accepted independently with the same α, which real text does not quite do.",
        "vlab.q.empty": "Press <b>New round</b>: the app generates a run and stops before each verification.",
        "vlab.q.draft": "draft {i}",
        "vlab.q.q": "drafter's q = {q}",
        "vlab.q.det": "These drafts are deterministic (q = 1), so a draft survives with probability p(draft).",
        "vlab.q.prob": "A draft survives with probability min(1, p/q): a confident drafter (large q) needs the target to agree strongly.",
        "vlab.q.step": "<b>Step {i}</b> · {left} more step(s) with drafts after this",
        "vlab.q.hint": "Drafter confidence: {qs}. {hint} Tick the drafts you think the target will accept, then press Reveal.",
        "vlab.rv.right": "<b>{points} / {max}</b> right",
        "vlab.rv.perfect": " — perfect!",
        "vlab.rv.added": "The target then added {token}.",
        "vlab.rv.accept": "accept",
        "vlab.rv.reject": "reject",
        "vlab.rv.out.accepted": "accepted",
        "vlab.rv.out.rejected": "rejected",
        "vlab.rv.out.not judged": "not judged",
        "vlab.rv.h.draft": "draft",
        "vlab.rv.h.guess": "your guess",
        "vlab.rv.h.outcome": "outcome",
        "vlab.rv.note": "A draft is accepted when u &lt; min(1, p/q). After the first rejection the remaining drafts are thrown away without being judged.",
        "vlab.sc.score": "session score",
        "vlab.sc.drafts": "drafts guessed right",
        "vlab.sc.steps": "{steps} step(s), {perfect} perfect",
        "vlab.sc.rates": "acceptance-rate guesses",
        "vlab.sc.runs": "{n} run(s)",
        "vlab.sc.title": "Your score (this session)",
        "vlab.sc.step": "step {step}: {points}/{max}",
        "vlab.sc.step_exact": "step {step}: {points}/{max} ✓ all right",
        "vlab.sc.rate": "acceptance guess {guess} vs {actual}: {points}/10",
        "vlab.sc.none": "no draft judged",
        "vlab.r.empty": "Run a generation or import a trace JSON to replay it.",
        "vlab.r.steps": "{n} steps",
        "vlab.r.tokens": "{n} tokens",
        "vlab.r.acceptance": "acceptance {rate}",
        "vlab.r.drafter": "drafter {name}",
        "vlab.r.preset": "preset {v}",
        "vlab.r.temperature": "temperature {v}",
        "vlab.r.seed": "seed {v}",
        "vlab.r.rule": "rule {v}",
    }
)

MESSAGES.update({"vlab.cls.line": "`{preset}` · γ = {gamma} · T = {t} · seed {seed} · share with `{query}`"})

MESSAGES.update(
    {
        "vlab.link": "Link:",
        "vlab.link.classroom": "Classroom preset “{name}” loaded from the link.",
        "vlab.link.settings": "Settings loaded from the link: {settings}.",
        "vlab.link.prompt": "prompt",
        "vlab.link.ignored": "Ignored: {errors}.",
    }
)

MESSAGES.update(
    {
        "sv.provenance": "{what} ({date}, {machine}; {parts}). ",
        "sv.sep": ", ",
        "sv.about.preset": "preset",
        "sv.about.dtype": "dtype",
        "sv.about.drafter": "drafter",
        "sv.about.gamma": "gamma",
        "sv.about.temperature": "temperature",
        "sv.about.tokens": "tokens",
    }
)

# ---- each rule's description, by the engine's key (playground.rules); a test checks every rule has one
MESSAGES.update(
    {
        "vlab.rule.lossless.what": "Accept d with probability min(1, p(d)/q(d)); after a rejection resample from norm(max(0, p − q)); after all drafts, a bonus token from p at position γ+1.",
        "vlab.rule.lossless.expect": "No drift: the speculative histogram matches the target's up to sampling noise.",
        "vlab.rule.block.what": "Every draft gets its own u; keep the longest prefix whose last draft has u < h, where h mixes the weight w = min(1, w·p/q) carried along the block with the residual mass left at that position (a draft can be kept although its own u failed). Then resample from norm(max(0, w·p − q)), or the bonus after the whole block.",
        "vlab.rule.block.expect": "No drift, like the token-by-token rule, and at least as many drafts kept on average: compare tokens/pass (vs correct) with the first rule's. Its acceptance counts every draft as judged, the token-by-token rule's only those before the first rejection.",
        "vlab.rule.softmax-q.what": "The drafter drafts its argmax (q is really a point mass) but the verifier plugs in the drafter's softmax as q. The draft is accepted too often, and the residual wrongly excludes it.",
        "vlab.rule.softmax-q.expect": "Drift towards the drafter's favourite tokens. Needs a model drafter at temperature > 0.",
        "vlab.rule.exact-match.what": "Draw a fresh token from p and accept the draft only if it is the same token; on a mismatch emit that sample. When p = q a draft survives with probability Σp² instead of 1.",
        "vlab.rule.exact-match.expect": "By the math this is lossless: no drift (p-value not small), but the acceptance rate drops — compare it with the correct rule's.",
        "vlab.rule.target-sample.what": "After a rejection the token is drawn from p instead of norm(max(0, p − q)), so tokens the drafter already proposes often are counted twice.",
        "vlab.rule.target-sample.expect": "Drift towards tokens both models like (overlap of p and q is over-represented).",
        "vlab.rule.bonus-wrong-position.what": "When every draft is accepted, the bonus token is sampled from the distribution of the last draft's position (which does not see that draft) instead of the next position.",
        "vlab.rule.bonus-wrong-position.expect": "Drift in the token after a fully accepted step: visible in 2- and 3-token continuations.",
        "vlab.rule.typical.what": "Accept d if p(d) > min(ε, δ·exp(−H(p))) (ε = 0.09, δ = 0.3); on rejection emit a sample from p.",
        "vlab.rule.typical.expect": "Higher acceptance (faster) and a measurable drift: the trade-off a serving system may choose.",
    }
)

# ---- the Benchmark's quality column (tools.bench.aggregate.QUALITY: one key per code)
MESSAGES.update(
    {
        "bench.q.reference": "reference",
        "bench.q.reference_sampled": "reference (sampled)",
        "bench.q.identical": "identical to target",
        "bench.q.identical_ar": "identical to our autoregressive",
        "bench.q.differs_ar": "differs from our autoregressive",
        "bench.q.differs_ar_bf16": "differs from our autoregressive (bfloat16 rounding)",
        "bench.q.not_compared": "not compared",
        "bench.q.differs_bf16": "differs from token {fd} (bfloat16 rounding of the multi-token pass; exact in float32)",
        "bench.q.differs_hf": "differs from hf_generate from token {fd}",
        "bench.q.lossless": "lossless (exact sampling)",
        "bench.q.lossy_drift": "lossy: drift {tv} TV/token",
        "bench.q.lossy": "lossy",
    }
)
