"""English messages, part 2: the stats card, charts, the per-token table, engine messages,
confidence, repetition and provenance (merged into ``visual.i18n.en.MESSAGES``)."""

from playground.errors import ENGLISH

MESSAGES: dict[str, str] = {
    # ---- the stats card (visual/stats.py)
    "st.t1_race": "the autoregressive run of this race ({n} single-token passes)",
    "st.t1_calibration": "a {n}-token autoregressive calibration run after the speculative run",
    "st.c_formula": "c = {per} ÷ t₁ {t1} = {c}",
    "st.of_verify": "{share} of a target verify pass ({ms})",
    "st.no_target_step": "no target step measured yet to compare with",
    "st.cost_hybrid": "draft cost per token vs target step",
    "st.cost_hybrid_def": (
        "the drafter's time per drafted token (MTP and prompt-lookup drafts together; lookup costs ~0 ms)"
    ),
    "st.cost_mtp": "MTP draft cost per token vs target step",
    "st.cost_mtp_def": "the MTP drafter's time per drafted token",
    "st.per_token": "{ms}/token",
    "st.of_vocab": " of {n}",
    "st.split": " ({fixed} fixed + {extra} from the context)",
    "st.vocab": "vocabulary the MTP drafter scored",
    "st.vocab_def": "scored {n}{of} tokens{split} per draft step, not the whole vocabulary; every other token has q = 0",
    "st.empty": "Stats appear here once the first step has run.",
    "st.alpha": "acceptance rate α",
    "st.alpha_def": "accepted drafts ÷ drafts the target judged ({a} / {j}); ",
    "st.alpha_block": "block verification judges every draft",
    "st.alpha_token": "drafts after a rejection are never judged",
    "st.tpc": "tokens per target call",
    "st.tpc_def": "new tokens ÷ verify passes ({n} / {steps}); autoregressive decoding gets exactly 1",
    "st.saved": "target calls saved",
    "st.saved_def": "{n} tokens needed {steps} target passes instead of {n}",
    "st.eff": "draft efficiency",
    "st.eff_def": "accepted ÷ all drafted tokens ({a} / {d}), wasted drafts included",
    "st.tps_value": "{v} tok/s",
    "st.tps": "speculative throughput",
    "st.tps_def": "{n} tokens in {ms} of wall time, prefill included",
    "st.live": "live…",
    "st.pending": "The numbers appear once the run has finished: drawing them while it computes would slow the run they measure.",
    "st.verify_median": "Target passes of this run: median {ms} over {n} passes, from the per-pass times the API returns as {field}; compare it with a {api} run of the same request.",
    "st.title": "Run statistics",
    "st.block_note": (
        "Block verification (Sun et al. 2025): the target judges the γ drafts together and keeps the longest prefix "
        "that passes, so every draft is judged and α here is kept ÷ drafted. The prediction below uses token "
        "verification’s E, which assumes each draft is kept independently; block verification keeps at least as "
        "many tokens per step on average, so compare with the measured speedup."
    ),
    "st.measured": "measured speedup",
    "st.measured_def": (
        "speculative tok/s ÷ autoregressive tok/s ({spec} / {ar}), each run timed on its own, one after the other"
    ),
    "st.measured_wait": "waiting for the autoregressive run to finish",
    "st.measured_none": "not measured: choose Race mode to time the autoregressive baseline",
    "st.same": "✓ Speculative and autoregressive outputs are identical, token for token.",
    "st.differ_sampling": (
        "With sampling (temperature > 0) both runs are different samples from the same distribution, so they may "
        "differ."
    ),
    "st.differ_greedy": (
        "At temperature 0 they should match; a difference comes from floating-point near-ties (batched vs "
        "single-token matmuls), most often in bfloat16."
    ),
    "st.differ": "≠ Outputs differ from token {n} on. {why}",
    "st.t1_missing": (
        "t₁ (one target pass over a single token) was not measured in this run, so c, v<sub>γ</sub> and S are not "
        "shown. Use Race mode, or tick “measure t₁” for a short autoregressive calibration run."
    ),
    "st.no_full_step": "No step drafted all γ = {g} tokens yet, so v<sub>γ</sub> is not measured.",
    "st.early": (
        "The drafter stopped early (it was unsure) in {early} of {steps} steps, drafting {mean} tokens per step on "
        "average instead of γ = {g}. The formula is for chains of γ drafts: it predicts the same drafter without "
        "early stopping; the measured speedup includes what stopping saved."
    ),
    "st.v_low": (
        "v<sub>γ</sub> < 1 means a pass over γ+1 tokens looked faster than one over a single token: the machine's "
        "speed changed between the measurements (a shared or busy CPU), so this prediction is unreliable. Run "
        "again, or use Race mode."
    ),
    "st.term.alpha": "measured acceptance rate: accepted ÷ judged drafts",
    "st.term.gamma": "drafts proposed per step",
    "st.term.E": (
        "(1 − α<sup>γ+1</sup>) / (1 − α): expected tokens per step if each draft is accepted independently with "
        "probability α"
    ),
    "st.term.t1": "the target's time for one forward pass over a single token, measured by {source}",
    "st.term.t1_none": "nothing yet",
    "st.term.c": "drafter ms per drafted token ÷ t₁ = {per} ÷ {t1} (every drafted token)",
    "st.term.v": "target ms per verify pass over γ+1 tokens ÷ t₁ = {verify} ÷ {t1}",
    "st.pred_title": "Predicted speedup from the measured α, c and v<sub>γ</sub>",
    "st.pred_note": (
        "The prediction ignores prefill and per-step bookkeeping and assumes i.i.d. acceptance; compare it with the "
        "measured speedup."
    ),
    # ---- charts (visual/charts.py)
    "ch.press_run": "Press Run to see this chart.",
    "ch.race": "Tokens vs wall-clock time",
    "ch.speculative": "speculative",
    "ch.autoregressive": "autoregressive",
    "ch.running_speedup": "running speedup",
    "ch.speedup_so_far": "speedup so far",
    "ch.speedup_axis": "speedup (×)",
    "ch.race_note": "Each run timed on its own, one after the other on this machine (not simultaneously);<br>t = 0 at each run's start, prefill included.",
    "ch.ar_pending": "Autoregressive run in progress…<br>",
    "ch.solo": "Speculative run only; choose Race mode to time the autoregressive baseline too.",
    "ch.wall_time": "wall time (s)",
    "ch.tokens_committed": "tokens committed",
    "ch.acc": "Acceptance by draft position",
    "ch.no_judged": "No drafts judged yet.",
    "ch.p_accept": "P(accept | judged)",
    "ch.position_hover": "position %{x}: %{y:.2f}",
    "ch.overall_alpha": "overall α = {alpha}",
    "ch.draft_position": "draft position i (1 = first draft)",
    "ch.accepted_judged": "accepted / judged",
    "ch.len": "Accepted drafts per step",
    "ch.no_full": "No step with all {gamma} drafts yet.",
    "ch.measured_steps": "measured ({n} steps)",
    "ch.len_hover": "%{x} accepted: %{y:.2f} (%{customdata} steps)",
    "ch.predicted_from": "predicted from α = {alpha}",
    "ch.len_pred_hover": "%{x} accepted: %{y:.2f}",
    "ch.iid": "i.i.d. prediction",
    "ch.left_out": " ({n} shorter step{s} left out)",
    "ch.len_axis": "drafts accepted, steps with all γ drafts{note}",
    "ch.fraction": "fraction of steps",
    "ch.time": "Time per step: draft vs verify",
    "ch.draft": "draft",
    "ch.verify": "verify (1 target pass)",
    "ch.verify_short": "verify",
    "ch.other": "other (sampling, trace)",
    "ch.other_short": "other",
    "ch.step_ms_hover": "step %{x}: %{y:.1f} ms",
    "ch.tpc": "Tokens per target call",
    "ch.tokens_this_step": "tokens this step",
    "ch.tpc_hover": "step %{x}: %{y} tokens",
    "ch.running_mean": "running mean",
    "ch.mean_hover": "after step %{x}: %{y:.2f}",
    "ch.mean": "mean",
    "ch.ar_one": "autoregressive: 1",
    "ch.step_axis": "step (one target pass each)",
    "ch.step": "step",
    "ch.ms": "ms",
    "ch.tokens": "tokens",
    # ---- the per-token table as shown (visual/tables.py; the CSV keeps its English columns)
    "col.run": "run",
    "col.step": "step",
    "col.position": "position",
    "col.kind": "kind",
    "col.token_id": "token_id",
    "col.token": "token",
    "col.q_draft": "q_draft",
    "col.p_target": "p_target",
    "col.p_over_q": "p_over_q",
    "col.accept_prob": "accept_prob",
    "col.u": "u",
    "col.verdict": "verdict",
    "col.committed": "committed",
    "col.draft_ms": "draft_ms",
    "col.verify_ms": "verify_ms",
    "val.speculative": "speculative",
    "val.autoregressive": "autoregressive",
    "val.draft": "draft",
    "val.resample": "resample",
    "val.bonus": "bonus",
    "val.target": "target",
    "val.accepted": "accepted",
    "val.rejected": "rejected",
    "val.not judged": "not judged",
    "val.resampled": "resampled",
}
MESSAGES.update(
    {
        "run.shared": (
            "\n\n**Shared passes:** {shared} of {steps} target passes also carried other visitors' runs: each served "
            "{mean} runs on average, so this run's verify times are its share of each pass (the pass's time / the "
            "runs it served). In float32 the output is what the run alone gives; in bfloat16 a pass over many rows "
            "rounds differently from a pass over one, so a near-tie (or, when sampling, a draw) can go the other way."
        ),
        "run.shared_capped": (
            " Under that load {capped} step(s) decoded plainly, without drafts (the server turns speculation down "
            "when a pass is full): at temperature 0 that changes only the speed; when sampling, the output is "
            "still drawn from the target's distribution."
        ),
    }
)
MESSAGES.update(
    {
        # ---- drafter kinds in the narration (playground.drafters.registry's labels)
        "drafter.model": "the drafter model",
        "drafter.prompt-lookup": "prompt lookup",
        "drafter.mtp": "the MTP head",
        "drafter.mtp+lookup": "the MTP head or prompt lookup",
        "drafter.gemma4-assistant": "the Gemma 4 MTP assistant",
        "drafter.early-exit": "the target's first layers (early exit)",
        "drafter.other-tokenizer": "the drafter with another tokenizer",
    }
)
MESSAGES.update({"ch.tokens_hover": "%{x:.2f} s: %{y} tokens", "ch.speedup_hover": "%{x:.2f} s: %{y:.2f}×"})
MESSAGES.update({"di.end": "."})
MESSAGES.update(
    {
        # ---- confidence bars, repetition, provenance (issue 24, parts 3-4)
        "legend.sure_name": "bar under a token",
        "legend.sure_desc": (
            "how sure the target was of its own top choice there (softmax at temperature 1; full width = certain). "
            "Hover or focus a token for the drafter's own probability of it."
        ),
        "sure.target": "target's own top choice here: {share} sure",
        "sure.drafter": "drafter's own probability of it: {share}",
        "sure.copy": "drafter: a copy, no probability of its own",
        "st.loop_lookup": (
            "{share} of this output repeats text that came before (the model is looping). Prompt lookup copies "
            "repeated text for free, so the speedup here comes from the repetition more than from the drafter "
            "predicting new text. Try a prompt whose answer does not repeat itself to see the drafter alone."
        ),
        "st.loop": (
            "{share} of this output repeats text that came before (the model is looping). Repeated text is easy to "
            "predict, so acceptance here says more about the loop than about the drafter."
        ),
        "pg.prov_dl": "⬇ Text coloured by source (HTML)",
    }
)
MESSAGES.update(
    {
        "pg.settings": "Settings",
        "pg.key_hint": "Step view: left and right arrow keys step back and forward, space plays or pauses",
        "st.rep": "output that repeats earlier text",
        "st.rep_def": (
            "output tokens completing a 4-gram already in prompt + earlier output ({repeated} / {tokens}); distinct-2 "
            "{d2} (share of the output's word pairs that are new)"
        ),
        "prov.title": "Where each token came from",
        "prov.empty": "The generated text, coloured by where each token came from, appears here after a run.",
        "prov.legend_aria": "Tokens per source",
        "prov.detail": "{name}, step {n}",
        "prov.detail_from": "{name} ({who}), step {n}",
        "prov.mtp": "MTP head",
        "prov.mtp.desc": "drafted by the MTP head, accepted by the target",
        "prov.lookup": "prompt-lookup copy",
        "prov.lookup.desc": "copied from earlier text by prompt lookup, accepted",
        "prov.tree": "tree branch",
        "prov.tree.desc": "an accepted node of a draft tree",
        "prov.drafter": "other drafter",
        "prov.drafter.desc": "drafted by another drafter, accepted",
        "prov.target": "target correction",
        "prov.target.desc": "the target's own token: a resample after a rejection, or no draft",
        "prov.bonus": "bonus",
        "prov.bonus.desc": "all drafts accepted: one more token from the target's p",
    }
)

# ---- the engine's errors and notices (visual/i18n/errors.py): the engine's own English, one key per code
MESSAGES.update({f"eng.{code}": text for code, text in ENGLISH.items()})
MESSAGES.update({"eng.full_stop": "."})  # ends a message shown as a sentence
