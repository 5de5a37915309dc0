"""English messages of the app, by key (``visual.i18n``).  ``{name}`` is filled in with
``str.format``; ``{s}`` is the English plural ending (``visual.i18n.plural``).  Every key here
is in ``visual.i18n.zh`` too (tests/visual/test_i18n.py).  Token text and numbers are never here."""

from visual.i18n.en_lab import MESSAGES as _LAB
from visual.i18n.en_results import MESSAGES as _RESULTS

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
        "The MTP head stops its chain once its confidence in it (the product of its top probability at each "
        "draft) falls below this, instead of always drafting γ. 0 = always γ. Exact either way; other drafters "
        "ignore it."
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
    "pg.min_p": "min-p (0 = off)",
    "pg.min_p.info": "Keep the tokens at least this fraction as likely as the most likely one; applied to p and q alike, so still exact",
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
        "stopped after {n} draft{s}: the head’s confidence in its chain (the product of its top probability at "
        "each draft, {path}) fell below the {rule}, so no step was spent on drafts the target would likely reject. "
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
}
MESSAGES.update(_RESULTS)
MESSAGES.update(_LAB)
