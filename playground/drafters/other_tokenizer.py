"""``other-tokenizer``: a drafter model with its own tokenizer; its text is re-tokenized for the target.

Each step:

1. the committed target tokens are decoded to text and encoded with the *drafter's*
   tokenizer; the drafter's cache keeps the longest prefix of that tokenization it already
   holds (a re-tokenization may change the last few drafter tokens) and is cropped to it;
2. the drafter continues greedily for up to γ of its own tokens (its argmax; it never
   samples), and the text those tokens add is cut off;
3. that text is encoded with the *target's* tokenizer: the committed text plus the new
   text is re-encoded and, if the result extends the committed tokens, the extension is
   the draft; otherwise the new text alone is encoded.  At most γ target tokens are
   proposed.  If the drafter ends its text (its EOS), the target's EOS follows the draft.

The drafts are a deterministic function of the committed tokens (no random draw, no
look at the target's probabilities), so their q is a point mass and the engine's one-hot
rule is exactly lossless at every temperature, like prompt lookup's: greedy output is the
target's greedy output token for token, and sampled output follows the target's
distribution (tests/drafters/test_other_tokenizer.py checks both, with a mutant).  What this
drafter does NOT do is draft by *sampling* from its own distribution: that q lives on
another vocabulary, and mapping it onto target tokens (the obvious rule) is biased —
the published lossless rules for heterogeneous vocabularies need q restricted to the
shared tokens, which this module does not implement.  ``Draft.info`` carries both
tokenizations of the drafted text for the step view.  No draft trees.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import DynamicCache

from playground.decoding.draft import Draft, TargetState, token_id_set
from playground.decoding.hf_calls import logits_to_keep_arg
from playground.decoding.sampling import SamplingParams
from playground.drafters.base import BaseDrafter


def encode(tokenizer, text: str, specials: bool) -> list[int]:
    ids = tokenizer(text, add_special_tokens=specials)["input_ids"]
    if hasattr(ids, "tolist"):
        ids = ids.tolist()
    return [int(i) for i in ids]


def decode(tokenizer, ids: list[int]) -> str:
    return tokenizer.decode(ids, skip_special_tokens=True)


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def target_tokens_for(
    target_tokenizer, committed_text: str, committed: list[int], new_text: str
) -> tuple[list[int], str]:
    """Target token ids for ``new_text`` after the committed tokens, and how they were found:
    "in context" (the re-encoded committed text + new text extends the committed tokens) or
    "alone" (it does not: the new text encoded by itself)."""
    body = [t for t in committed if t not in token_id_set(getattr(target_tokenizer, "all_special_ids", ()))]
    full = encode(target_tokenizer, committed_text + new_text, specials=False)
    if full[: len(body)] == body:
        return full[len(body) :], "in context"
    return encode(target_tokenizer, new_text, specials=False), "alone"


class OtherTokenizerDrafter(BaseDrafter):
    name = "other-tokenizer"
    needs_drafter_model = True

    def __init__(self, model, drafter_tokenizer, target_tokenizer, target_eos_ids=(), drafter_eos_ids=None) -> None:
        self.model = model
        self.dtok = drafter_tokenizer
        self.ttok = target_tokenizer
        self.target_eos = sorted(token_id_set(target_eos_ids))
        if drafter_eos_ids is None:
            drafter_eos_ids = getattr(drafter_tokenizer, "eos_token_id", None)
        self.drafter_eos = token_id_set(drafter_eos_ids)
        self.cache: DynamicCache | None = None
        self._seen: list[int] = []  # drafter token ids whose K/V are in self.cache

    def start(self, state: TargetState) -> None:
        self.cache = DynamicCache(config=self.model.config)
        self.cache.activate_past_recording()
        self._seen = []

    def _sync(self, committed: list[int]) -> tuple[str, list[int]]:
        """(committed text, its drafter tokenization); the cache is cropped to the longest
        prefix of that tokenization it holds, leaving at least its last token to feed."""
        text = decode(self.ttok, committed)
        ids = encode(self.dtok, text, specials=True)
        keep = min(common_prefix(self._seen, ids), len(ids) - 1)
        drop = len(self._seen) - keep
        self.cache.crop(-drop if drop else 0)
        del self._seen[keep:]
        return text, ids

    @torch.inference_mode()
    def propose(
        self, state: TargetState, gamma: int, params: SamplingParams, generator: torch.Generator | None
    ) -> Draft:
        assert self.cache is not None, "start() not called"
        text, ids = self._sync(state.committed_ids)
        pending = ids[len(self._seen) :]  # >= 1 token
        new: list[int] = []
        calls = 0
        ended = False
        for _ in range(gamma):
            out = self.model(
                input_ids=torch.tensor([pending], device=self.model.device),
                cache=self.cache,
                use_cache=True,
                logits_to_keep=logits_to_keep_arg(len(pending), 1),
            )
            calls += 1
            self._seen.extend(pending)
            tok = int(out.logits[0, -1].argmax())  # the drafter's argmax over ITS vocabulary
            if tok in self.drafter_eos:
                ended = True
                break
            new.append(tok)
            pending = [tok]
        before = decode(self.dtok, ids)
        after = decode(self.dtok, ids + new)
        new_text = after[len(before) :] if after.startswith(before) else ""
        drafts, how = target_tokens_for(self.ttok, text, state.committed_ids, new_text) if new_text else ([], "")
        drafts = drafts[:gamma]
        if ended and len(drafts) < gamma and self.target_eos:
            drafts.append(self.target_eos[0])
        info: dict[str, Any] = {
            "drafter_text": new_text,
            "drafter_tokens": [self.dtok.decode([t]) for t in new],  # each token's own text, specials spelt out
            "target_tokens": [self.ttok.decode([t]) for t in drafts],
            "retokenized": how,
            "drafter_ended": ended,
        }
        return Draft(token_ids=drafts, draft_probs=None, info=info, forward_calls=calls)

    def accept(self, n_accepted: int, state: TargetState) -> None:
        self._sync(state.committed_ids)

    def cache_len(self) -> int | None:
        return None if self.cache is None else self.cache.get_seq_length()
