"""English messages of the app, by key (``visual.i18n``).  ``{name}`` is filled in with
``str.format``; ``{s}`` is the English plural ending (``visual.i18n.plural``).  Every key here
is in ``visual.i18n.zh`` too (tests/visual/test_i18n.py).  Token text and numbers are never here."""

MESSAGES: dict[str, str] = {
    # ---- app.py: header, tabs
    "app.title": "Speculative Decoding Playground",
    "app.header": (
        "# Speculative Decoding Playground\n"
        "Watch **lossless speculative decoding** step by step: a cheap *drafter* proposes γ tokens, the *target* "
        "model checks them all in **one** forward pass, keeps each draft with probability min(1, p/q), and always "
        "adds one token of its own (a resample from the residual after a rejection, or a bonus token). The output "
        "follows the target's distribution exactly; the speedup depends on how often drafts are accepted and what "
        "they cost."
    ),
    "app.lang": "Language",
    "tab.playground": "Playground",
    "tab.lab": "Classroom lab",
    "tab.bench": "Benchmark",
    # ---- the Playground's controls (visual/playground_tab.py)
    "pg.preset": "Preset (model pair + drafter)",
    "pg.drafter": "Drafter",
    "pg.mode": "Mode",
    "pg.mode.info": "Race: speculative, then autoregressive on the same prompt and models, each timed.",
    "pg.mode.speculative": "Speculative",
    "pg.mode.race": "Race",
    "pg.gamma": "γ: drafts per step",
    "pg.tree_nodes": "Draft tree nodes",
    "pg.tree_nodes.info": (
        "1 = one chain of γ drafts; more = a tree of alternatives (up to γ deep), all checked in one target pass"
    ),
    "pg.draft_stop": "Stop drafting below (MTP)",
    "pg.draft_stop.info": (
        "The MTP head stops its chain once its confidence in it (the product of its drafts’ probabilities) falls "
        "below this, instead of always drafting γ. 0 = always γ. Exact either way; other drafters ignore it."
    ),
    "pg.verification": "Verification",
    "pg.verification.info": (
        "Token: each draft kept with probability min(1, p/q) until the first rejection. Block: the drafts judged "
        "together and the longest passing prefix kept, at least as many per step on average (chains only: tree "
        "nodes 1). Both are exact; at temperature 0 they give the same tokens."
    ),
    "pg.verification.lossless": "Token verification (Leviathan et al.)",
    "pg.verification.block": "Block verification (Sun et al. 2025)",
    "pg.temperature": "Temperature",
    "pg.temperature.info": "0 = greedy (exact argmax path)",
    "pg.top_k": "top-k (0 = off)",
    "pg.seed": "Seed",
    "pg.top_p": "top-p",
    "pg.max_new_tokens": "Max new tokens",
    "pg.dtype": "dtype",
    "pg.dtype.default": "preset default",
    "pg.calibrate": "Measure t₁ (8-token autoregressive calibration) in Speculative mode",
    "pg.calibrate.info": "Needed for the predicted speedup; Race mode measures it anyway.",
    "pg.speed": "Animation: seconds per frame",
    "pg.prompt": "Prompt",
    "pg.prompt.placeholder": "Type a prompt, or pick an example below",
    "pg.examples": "Classroom examples",
    "pg.run": "Run ▸",
    "pg.step": "Step ›",
    "pg.play": "▶ Play",
    "pg.pause": "❚❚ Pause",
    "pg.back": "‹ Back",
    "pg.reset": "↺ Reset",
    "pg.downloads": "Per-token table, text and downloads",
    "pg.table": "Every token the run looked at",
    "pg.json": "⬇ Trace (JSON)",
    "pg.csv": "⬇ Token table (CSV)",
    "pg.text": "Generated text",
    "pg.race_plot": "Race",
    "pg.info.nothing_to_play": "Nothing to play yet: press Run first.",
    "pg.info.last_step": "That was the last step.",
    "pg.info.next_pending": "The next step is still being generated.",
    "pg.view.stopped": "The run stopped: {error}",
    "pg.view.generating": "Generating… the first step appears as soon as the target has verified it.",
    "pg.starting": "Starting…",
    "pg.warm.ready": "Models for **{preset}** ready (loaded in {seconds} s).",
    "pg.warm.failed": "**Could not load {preset}:** {error}",
    "pg.warm.loading": "Loading models for **{preset}** at start-up: {message} ({percent})",
    # ---- the Run (visual/playground_run.py)
    "run.status.error": "**Error:** {error}",
    "run.status.loading": "Loading the models (once per process)…",
    "run.status.speculative": "Speculative run: {steps} step(s), {tokens} token(s) so far…",
    "run.status.autoregressive": (
        "Race: speculative done; autoregressive run on the same prompt and models, {tokens} token(s) so far…"
    ),
    "run.status.calibrating": "Measuring t₁: a {n}-token autoregressive calibration run…",
    "run.status.done": (
        "**Done.** Speculative: {tokens} tokens in {steps} target passes, {seconds} s (stopped: {stopped}).{extra}"
    ),
    "run.status.done_ar": " Autoregressive: {tokens} tokens in {seconds} s.",
    "run.failed": "The run failed: {error}",
    "run.text.speculative": "[speculative]",
    "run.text.autoregressive": "[autoregressive]",
    "stop.eos": "end of sequence",
    "stop.max_new_tokens": "token budget",
    "stop.max_tokens": "token budget",
    "stop.length": "token budget",
    "stop.budget": "token budget",
    # ---- the form's messages (engine messages are mapped to these and eng.* in visual/i18n/errors.py)
    "err.prompt_empty": "The prompt is empty: type at least one word.",
    "err.preset_unavailable": "Preset {preset} is unavailable here: {reason}",
    "err.drafter_unknown": "Preset {preset} has no {drafter} drafter; choose one of: {choices}.",
    "err.whole": "{name} must be a whole number, got {value}.",
    "err.between": "{name} must be between {lo} and {hi}, got {value}.",
    "err.top_p_range": "top_p must be in (0, 1], got {value}.",
    # ---- presets (visual/presets.py)
    "preset.unavailable": "unavailable",
    "preset.line": "target `{target}` · drafter `{drafter}` · {dtype} · γ = {gamma}",
    "preset.unavailable_here": "⛔ **Unavailable here:** {reason}",
    # ---- the step view (visual/tokens.py)
    "state.drafted": "drafted",
    "state.accepted": "accepted",
    "state.rejected": "rejected",
    "state.discarded": "discarded",
    "state.resampled": "resampled",
    "state.bonus": "bonus",
    "state.target": "target only",
    "legend.drafted": "proposed by the drafter, waiting for the target",
    "legend.accepted": "the target kept the draft (u < min(1, p/q))",
    "legend.rejected": "the target refused the draft (u ≥ min(1, p/q))",
    "legend.discarded": "drafted after a rejection, never judged",
    "legend.resampled": "the target's correction, drawn from norm(max(0, p − q))",
    "legend.bonus": "all drafts accepted: one more token drawn from p at position γ+1",
    "legend.target": "no draft this step: the target produced the token",
    "legend.aria": "Legend of token states",
    "chip.aria": "{state} token {token}",
    "tip.draft": "draft #{position}, token id {id}",
    "tip.q": "q(x) drafter = {q}",
    "tip.p": "p(x) target = {p}",
    "tip.ratio_block": "p/q = {ratio}, weight w = {w}, h = {h}",
    "tip.ratio": "p/q = {ratio}, min(1, p/q) = {a}",
    "tip.u": "u = {u} {rel} {a} → {verdict}",
    "tip.accept": "accept",
    "tip.reject": "reject",
    "tip.never_judged": "never judged: an earlier draft was rejected",
    "tip.waiting": "waiting for the target's verify pass",
    "tip.token_id": "token id {id}",
    "tip.resample": "drawn from norm(max(0, p − q)) at position {position}: {prob}",
    "tip.bonus": "drawn from p at position {position} (γ+1): p = {prob}",
    "tip.from_p": "drawn from p: p = {prob}",
    "tip.step": "step {n}",
    "block.kept": "kept",
    "block.kept_anyway": "kept anyway: a later draft passed",
    "block.rejected": "rejected: no later draft passed either",
    "block.not_judged": "not judged: the block ended at an earlier end-of-sequence draft",
    "block.rule": (
        "Block verification: the longest prefix whose last draft has u < h was kept (h mixes the weight w carried "
        "along the block with the residual mass at that position), so a draft can be kept with u ≥ h when a later "
        "draft passed."
    ),
    "prompt.cut": "… {n} earlier characters … ",
    "prompt.aria": "prompt: {text}",
    "nl.not_judged": "{name} = {a}; not judged, no u drawn",
    "nl.landed_below": "u = {u} landed below {name} = {a}: {why}",
    "nl.landed_above": "u = {u} landed at or above {name} = {a}: {why}",
    "verdict.not_judged": "not judged",
    "verdict.kept_later": "kept",
    "verdict.kept_later_why": "(u ≥ {a}, a later draft passed)",
    "verdict.accepted": "accepted",
    "verdict.rejected": "rejected",
    "sentence.head": "Draft {position} {token}: drafter gave it {q}, target {p}",
    "sentence.ratio_undefined": "ratio undefined (q = 0)",
    "sentence.ratio_ge": "ratio {r} ≥ 1",
    "sentence.ratio_lt": "ratio {r} < 1",
    "sentence.block": "{head}, {ratio}, weight w = {w}; {outcome}.",
    "sentence.not_judged": "{head}, {ratio} → not judged: an earlier draft was already rejected.",
    "sentence.always": "{head}, {ratio} → accepted (always).",
    "sentence.judged": "{head}, {ratio}; u = {u} {rel} {a} → {verdict}.",
    "table.draft_token": "draft token",
    "table.q": "q(x) drafter",
    "table.p": "p(x) target",
    "table.h": "h (weight w)",
    "table.u": "u on [0, 1)",
    "table.verdict": "verdict",
    "table.pending": "waiting for the target’s single verify pass…",
    "table.caption.draft": "The drafter proposed these tokens; q(x) is the probability it drew each one with.",
    "table.caption.block": (
        "Block verification judges every draft, each with its own u (the paper's η), against h instead of "
        "min(1, p/q); the kept prefix ends at the last draft with u < h."
    ),
    "table.caption.token": "Each draft is accepted iff u < min(1, p/q); the first rejection ends the step.",
    "table.aria": "Drafted tokens of step {n}",
    "bars.target_depth": "target p at depth {position}",
    "bars.left_after_children": "what is left of p after every rejected child",
    "bars.note.tree": (
        "Every child tried at this node was rejected. Each rejection removed that child's q from what was left of p "
        "(the bars at the branching point above show it sibling by sibling); the target draws from the remainder, "
        "renormalised. This is what keeps the output distribution exactly p with several siblings."
    ),
    "bars.residual": "residual norm(max(0, p − q))",
    "bars.note.resample": (
        "After the rejection the target does not simply take its own favourite: it draws from the residual "
        "max(0, p − q), renormalised. The rejected draft had p < q, so its residual is 0. This is what makes the "
        "output distribution exactly p."
    ),
    "bars.target_bonus": "target p at position {position} (γ+1)",
    "bars.note.bonus": (
        "Every draft was accepted, and the same target pass already computed p one position further: the bonus "
        "token is drawn from it for free."
    ),
    "bars.target_at": "target p at position {position}",
    "bars.note.target": "No draft this step, so the target produced one token from its own distribution p.",
    "bars.drafter_at": "drafter q at position {position}",
    "bars.block_residual": "residual norm(max(0, w·p − q)), w = {w}",
    "bars.note.block": (
        "The kept prefix ended after {n} draft{s}, so the target draws from the residual max(0, w·p − q), "
        "renormalised, where w is the weight the block carried to this position (w = 1 at the first position: the "
        "usual residual max(0, p − q)). Scaling p by w accounts for the drafts before it that were kept; this is "
        "what keeps block verification exact."
    ),
    "bars.rejected_draft": "✗ rejected draft",
    "bars.no_mass": "(no mass)",
    "pick.resampled": "resampled",
    "pick.bonus": "bonus",
    "pick.chosen": "chosen",
    "pick.accepted": "accepted",
    "narr.draft": "Step {n}: {drafter} proposes {k} token{s} ({tokens}) in {ms}; the target has not looked at them yet.",
    "narr.the_drafter": "the drafter",
    "narr.tail": " — {n} token{s} from one target pass ({ms}).",
    "narr.tail_eos": " — {n} token{s} from one target pass ({ms}); end of sequence reached.",
    "narr.target_itself": "the target produced {token} itself (p = {p})",
    "narr.nothing": "nothing was produced",
    "narr.no_draft": " (no draft this step)",
    "narr.no_drafts": "Step {n}{why}: {what}{tail}",
    "narr.step": "Step {n}: ",
    "narr.all_bonus": "all {k} drafts accepted, and the target added the bonus token {token} drawn from p at position {position}",
    "narr.accepted_some": "the target accepted {a} of {k} drafts ({tokens}), ",
    "narr.accepted_none": "the target accepted none of the {k} drafts, ",
    "narr.rejected": "rejected {token} (p/q = {ratio}, u = {u} ≥ {a})",
    "narr.resampled": " and resampled {token} from the residual",
    "narr.stopped": "and stopped",
    "narr.block": "Step {n}: {rule} It kept {kept} of {k} drafts",
    "narr.block_anyway_one": "; {tokens} kept although its own u was not below h",
    "narr.block_anyway_many": "; {tokens} kept although their own u were not below h",
    "narr.block_bonus": ", and the target added the bonus token {token} drawn from p at position {position}",
    "narr.block_resampled": ", and resampled {token} from the weighted residual norm(max(0, w·p − q))",
    "view.before_first": "Before the first step",
    "view.no_run": "No run yet",
    "view.press_step": "Press Step or Play to watch the first step.",
    "view.press_run": "Press Run to generate.",
    "view.drafting": "drafting",
    "view.verified": "verified",
    "view.head": "Step {n} of {total}{more} · {phase}",
    "view.each_draft": "Each draft in words",
    "view.text_aria": "Prompt and generated tokens",
    "list.sep": ", ",
    # ---- tree steps (visual/tree_view.py, tree_residuals.py, kv_strip.py)
    "tree.q": "q {q}",
    "tree.not_judged": "not judged",
    "tree.against_p": "p",
    "tree.against_residual": "residual after {n} rejected sibling{s}",
    "tree.facts": "q {q} · {against} {p} · ratio {ratio} · u {u} {rel} {a}",
    "tree.caption": (
        "The drafter proposed a tree of {n} node{s} ({roots} at the first position, {depth} deep); the target "
        "scores every node in one pass, each node seeing only its own ancestors."
    ),
    "tree.caption_verified": (
        " At each node its children are tried in order: a child is kept with probability min(1, r/q); after a "
        "rejection, r becomes the residual norm(max(0, r − q)) for the next sibling. The accepted path is "
        "highlighted; subtrees under rejected nodes are never judged."
    ),
    "tree.aria": "Draft tree of step {n}",
    "tree.root": "last committed token",
    "tree.narr.draft": (
        "Step {n}: the drafter proposes a tree of {k} tokens with {roots} alternatives for the next position, in "
        "{ms} ms; the target has not looked yet."
    ),
    "tree.narr.checked": "Step {n}: one target pass checked all {k} nodes; ",
    "tree.narr.path": "the accepted path is {path}",
    "tree.narr.no_branch": "no branch was accepted",
    "tree.narr.rejected": "; rejected: {tokens}",
    "tree.narr.bonus": "; then the target added the bonus token {token} at the leaf",
    "tree.narr.resampled": "; no child of the last accepted node survived, so the target resampled {token} from the residual",
    "tree.narr.tail": " — {n} token{s} from one target pass.",
    "res.p_at_node": "p at this node",
    "res.after": "after {token} was rejected: norm(max(0, r − q))",
    "res.note": (
        "Children are tried in order. Each rejection takes the rejected draft's q out of r: r ← norm(max(0, r − q)), "
        "and the next sibling is judged against that residual."
    ),
    "res.note_all": " Every child here was rejected, so the resample was drawn from the last residual.",
    "res.note_missing": " (This trace was recorded without the residuals after rejected siblings.)",
    "res.aria": "How r changed over the siblings here",
    "kv.pos": "pos {pos}",
    "kv.root_label": "root",
    "kv.root": "root: the newest committed token, kept",
    "kv.on_path": "on the accepted path, kept",
    "kv.off_path": "not on the accepted path, discarded",
    "kv.node": "node {i} {token} at position {pos}: {why}",
    "kv.root_kept": "root, kept where it was",
    "kv.moved": "accepted {token} (node {i}) now at position {pos}",
    "kv.positions": "positions {a}–{b}",
    "kv.position": "position {a}",
    "kv.contiguous": "contiguous positions",
    "kv.summary": (
        "The verify pass wrote {written} cache entries (the root + {nodes} node{s}); kept {kept} (root + accepted "
        "path), compacted to {where}; discarded {dropped}."
    ),
    "kv.aria": "Target KV cache, step {n}",
    "kv.written": "written by the verify pass (pass order; siblings share a position)",
    "kv.compacted": "after compaction",
    # ---- drafter boxes (visual/drafter_info.py)
    "di.threshold": "threshold {tau}",
    "di.tree_stopped": (
        "the tree stopped growing early: no further node’s path confidence (the product of the probabilities the "
        "head gave the tokens on its path) reached the {rule}. The shape is decided before each level is drawn, so "
        "the output is unchanged."
    ),
    "di.chain_stopped": (
        "stopped after {n} draft{s}: the head’s confidence in its chain (the product of the probabilities it gave "
        "its drafts, {path}) fell below the {rule}, so no step was spent on drafts the target would likely reject. "
        "Stopping depends only on drafts already made, so the output is unchanged."
    ),
    "di.may_stop": "the chain may stop early when the head’s confidence in it falls below the {rule}; it did not here.",
    "di.cost": "{n} token{s} in {ms} ({per}/token)",
    "di.cost_vs": " vs {ms} for the target’s verify pass",
    "di.cost_share": ": one draft token cost {share} of it",
    "di.cost_next": "; the target’s verify pass comes next.",
    "di.key.ran": "Ran:",
    "di.key.exit": "Exit:",
    "di.key.reused": "Reused:",
    "di.key.draft": "Draft:",
    "di.key.drafter": "Drafter:",
    "di.key.target": "Target:",
    "di.key.read": "Read:",
    "di.key.scored": "Scored:",
    "di.key.length": "Length:",
    "di.ee.stack": "layers 1–{k} of its {n}",
    "di.ee.first": "its first {k} layers",
    "di.ee.ran": "the target’s own {stack}, then its final norm and its full LM head, ",
    "di.ee.shared": "in the target’s own cache (its layers 1–{k}: {n} tokens after this step).",
    "di.ee.own": "on the drafter’s own cache ({n} tokens after this step).",
    "di.ee.nothing": "nothing",
    "di.ee.aria": "Early-exit drafter, step {n}",
    "di.ee.title": "Early exit: the target drafts with its first {k} layers",
    "di.ee.trained": (
        "trained: a learned linear map A turns the layer’s state into one the final norm and head expect (it "
        "changes the drafts only; the target verifies unchanged)."
    ),
    "di.ee.untrained": "untrained: the layer’s state goes straight into the final norm and head.",
    "di.tok.none": "none",
    "di.tok.in_context": "re-encoded together with the committed text",
    "di.tok.alone": "re-encoded on its own (in context it would have changed committed tokens)",
    "di.tok.drafter": "{n} of its own tokens: {tokens}",
    "di.tok.ended": " (then it ended the text)",
    "di.tok.target": "{n} target tokens: {tokens}",
    "di.tok.aria": "Drafter with another tokenizer, step {n}",
    "di.tok.title": "Another tokenizer: the drafter’s text, re-tokenized for the target",
    "di.mtp.no_hidden": "no target hidden state (none yet), so it began from its learned start state",
    "di.mtp.token": " (token {token})",
    "di.mtp.in_prompt": " (in the prompt)",
    "di.mtp.hidden": "the target’s final hidden state at position {pos}{where}",
    "di.mtp.kv_any": "the target’s cached keys/values",
    "di.mtp.kv_last": "the keys/values of the target’s layer {layer} (the last of its {n})",
    "di.mtp.kv_of": "the keys/values of the target’s layer {layer} (of layers 0–{last})",
    "di.mtp.kv_layer": "the keys/values of the target’s layer {layer}",
    "di.mtp.kv_at": "{which} at {n} position{s}",
    "di.mtp.no_kv": "no target keys/values (nothing cached yet)",
    "di.mtp.and": " and ",
    "di.mtp.no_cache": " — no drafter cache of its own",
    "di.mtp.candidates": "{n} candidate tokens",
    "di.mtp.candidates_ctx": "{n} candidate + {extra} context tokens",
    "di.mtp.share": " of {vocab} ({share} of the vocabulary)",
    "di.mtp.scored": "{what}{share} per draft step; every other token gets q = 0.",
    "di.mtp.aria": "MTP drafter, step {n}",
    "di.mtp.title": "MTP drafter: built on the target’s own state",
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
        # ---- engine messages (visual/i18n/errors.py maps playground's English ValueErrors to these)
        "eng.temperature_finite": "temperature must be a finite number, got {value}",
        "eng.temperature_range": "temperature must be 0 (greedy) or between {lo} and {hi}, got {value}",
        "eng.verification": "verification must be one of {choices}, got {value}",
        "eng.block_tree": (
            "block verification judges a chain of drafts, not a tree: set the draft tree nodes to 1, or choose "
            "token verification"
        ),
        "eng.draft_stop": "draft_stop must be a number in [0, 1) (0 = off), got {value}",
        "eng.whole": "{name} must be a whole number",
        "eng.tree_rule": "tree drafts are verified with the lossless rule only, not {rule}: set tree_nodes to 1",
        "eng.one_of": "{name} must be one of {choices}, got {value}",
        "eng.seed": "seed must be >= 0, got {value}",
        "eng.top_p_finite": "top_p must be a finite number, got {value}",
        "eng.bool": "{name} must be true or false, got {value}",
        "eng.prompt_long_tokens": "the prompt is too long: {n} tokens (limit {limit})",
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
        "eng.number_like": "{name} must be a number like 0.7, got {value}",
        "eng.number": "{name} must be a number, got {value}",
        "eng.number_plain": "{name} must be a number",
        "eng.prompt_text": "prompt must be text",
        "eng.prompt_empty": "prompt is empty",
        "eng.prompt_long": "prompt is too long: {n} characters (limit {limit})",
        "eng.unknown_preset": "unknown preset {preset}; choose one of: {choices}",
        "eng.shared_run": (
            "Shared run: an identical request (same preset, prompt, settings and seed) started this run at {at}; "
            "you watched it as it was computed. Timings are that run's."
        ),
        "eng.replay": (
            "Replay of a recorded run: an identical request (same preset, prompt, settings and seed) was computed "
            "at {at}; the trace is that run's, and so are its timings."
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
            "Use **tiny-random** for large N (5,000 takes seconds); real models cost a second or more per "
            "continuation on a CPU and allow N ≤ {n_slow}; on them a check stops after "
            "{wall} s and shows what it collected, marked partial (**■ Stop** ends it sooner)."
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
            "At temperature 0 the output never changes, only the speed."
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
            "`python -m playground bench`."
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

# ---- each rule's description, as playground.rules writes it (a test keeps them in step)
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

# ---- the Benchmark's quality column (playground.bench.aggregate._quality, matched by pattern)
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
