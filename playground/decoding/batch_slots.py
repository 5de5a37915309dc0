"""Runs' caches kept in one batched cache, so a shared pass neither restacks nor copies back.

The plain batched pass (``batch_pass``) copies every row's cached keys into a padded batch
before each pass and appends each row's new keys to its own cache after it: per layer, two
copies of every row and some thirty Python calls.  Here every layer has one preallocated
pair of tensors, keys and values [R, Hkv, S, D], and each run's cache lives in a row of them,
its slot:

    slot position s        holds the key (value) of the run's token at position s
    a full layer           the run's keys are a view of its slot, positions [0, L)
    a sliding layer        a view of positions [L - n, L): the n entries it holds (every
                           one, or the last W - 1 once it is past its window)

A pass writes each row's k new keys straight into positions [L, L + k) of its slot (the new
tokens are left-aligned in the pass, pads after them write to [L + k, L + K), which no query
sees and the run never holds), reads the pass's rows with one ``index_select`` per layer,
and afterwards points each run's layers at the longer views: the run's ``DynamicCache``
stays an ordinary cache to its own code (``crop`` slices the view, the MTP drafter reads it,
a pass alone concatenates a new tensor).

Whether a layer is in its slot is checked at every pass: its keys and values start where
the slot's position L - n starts, with the slot's strides.  A layer that left (a pass alone,
a tree's compaction, a buffer grown since) is copied back first.  Only the slot's owner ever
writes there, and only past its own length; a slot belongs to one cache for that cache's
life (a weak reference), so no other run's cache can see the writes.

Positions below a sliding layer's held entries may hold zeros or older keys: every query is
at position L or later, so the window hides them.  The buffers start zeroed, so no masked
slot holds a NaN (a masked key's weight is 0, and 0 x NaN would still be NaN).

This module does not decide which rows share a pass, and does not handle cache layers other
than transformers' ``DynamicLayer`` and ``DynamicSlidingWindowLayer`` (``plan`` says None;
the pass then takes the plain path).
"""

from __future__ import annotations

import weakref

import torch
from torch.nn.utils.rnn import pad_sequence
from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer

_LAYERS = (DynamicLayer, DynamicSlidingWindowLayer)


class SlotCache:
    """One model's slots: buffers grown as needed (rows by 8, length to a power of two),
    at most ``max_rows`` slots; ``release`` drops the buffers (the runs' views keep what
    they still use alive, and their next shared pass copies them into new buffers)."""

    MIN_LENGTH = 128

    def __init__(self, n_layers: int, heads: int, head_dim: int, dtype, device, max_rows: int) -> None:
        self.n_layers, self.heads, self.head_dim = n_layers, heads, head_dim
        self.dtype, self.device, self.max_rows = dtype, device, max_rows
        self.keys: list[torch.Tensor] = []  # per layer [R, Hkv, S, D]
        self.values: list[torch.Tensor] = []
        self._row_keys: list[list[torch.Tensor]] = []  # per layer, per slot: [1, Hkv, S, D] views
        self._row_values: list[list[torch.Tensor]] = []
        self._owners: list[weakref.ref | None] = []  # per slot: the cache living there
        self._slot_of: dict[int, int] = {}  # id(cache) -> slot (checked against the owner)

    @property
    def rows(self) -> int:
        return self.keys[0].shape[0] if self.keys else 0

    @property
    def length(self) -> int:
        return self.keys[0].shape[2] if self.keys else 0

    def release(self) -> None:
        self.keys, self.values, self._row_keys, self._row_values = [], [], [], []

    # ------------------------------------------------------------------ slots
    def slot(self, cache) -> int | None:
        """The slot of ``cache``, a free one given to it, or None when all are taken."""
        slot = self._slot_of.get(id(cache))
        if slot is not None and self._owners[slot]() is cache:
            return slot
        free = next((i for i, ref in enumerate(self._owners) if ref is None or ref() is None), None)
        if free is None:
            if len(self._owners) >= self.max_rows:
                return None
            free = len(self._owners)
            self._owners.append(None)
        self._slot_of = {key: s for key, s in self._slot_of.items() if s != free}
        self._owners[free] = weakref.ref(cache)
        self._slot_of[id(cache)] = free
        return free

    @classmethod
    def _grown(cls, rows: int, length: int) -> tuple[int, int]:
        """The buffers' size for ``rows`` rows of ``length`` tokens: rows rounded up to 8,
        the length to a power of two, at least ``MIN_LENGTH``."""
        return -(-rows // 8) * 8, max(cls.MIN_LENGTH, 1 << max(length - 1, 0).bit_length())

    @classmethod
    def tokens_for(cls, rows: int, length: int) -> int:
        """Token slots of buffers grown for ``rows`` rows of ``length`` tokens (per layer)."""
        rows, length = cls._grown(rows, length)
        return rows * length

    def _ensure(self, rows: int, length: int) -> None:
        if rows <= self.rows and length <= self.length:
            return
        grown_rows, grown_length = self._grown(rows, length)
        rows, length = max(self.rows, grown_rows), max(self.length, grown_length)
        shape = (rows, self.heads, length, self.head_dim)
        self.keys = [torch.zeros(shape, dtype=self.dtype, device=self.device) for _ in range(self.n_layers)]
        self.values = [torch.zeros(shape, dtype=self.dtype, device=self.device) for _ in range(self.n_layers)]
        self._row_keys = [list(t.split(1)) for t in self.keys]
        self._row_values = [list(t.split(1)) for t in self.values]

    def _holds(self, i: int, slot: int, t: torch.Tensor, start: int, values: bool) -> bool:
        """Whether ``t`` is the view of layer i's slot from position ``start``."""
        buf = (self.values if values else self.keys)[i]
        at = buf.data_ptr() + (slot * buf.stride(0) + start * buf.stride(2)) * buf.element_size()
        return t.data_ptr() == at and t.stride() == buf.stride()

    # ------------------------------------------------------------------ passes
    def plan(self, caches: list, lengths: list[int], slots_new: int) -> SlotPass | None:
        """Put each cache (holding ``lengths[b]`` tokens) in its slot with room for
        ``slots_new`` more; None when one cannot be (no free slot, a layer of another kind,
        layers of unequal lengths): the pass then stacks the rows itself."""
        slots = []
        for cache in caches:
            if len(cache.layers) != self.n_layers or not all(type(layer) in _LAYERS for layer in cache.layers):
                return None
            slot = self.slot(cache)
            if slot is None:
                return None
            slots.append(slot)
        width = max(n + slots_new for n in lengths)
        self._ensure(max(slots) + 1, width)
        starts = []
        for cache, slot, n_past in zip(caches, slots, lengths):
            held = self._adopt(cache, slot, n_past)
            if held is None:
                return None
            starts.append(held)
        return SlotPass(self, slots, lengths, starts, slots_new, width)

    def _adopt(self, cache, slot: int, n_past: int) -> list[int] | None:
        """Copy into the slot each layer not already there; per layer, the position its
        held entries start at (None: a layer whose length is not ``n_past``)."""
        starts = []
        for i, layer in enumerate(cache.layers):
            keys = layer.keys if layer.is_initialized else None
            held = 0 if keys is None or keys.numel() == 0 else keys.shape[-2]
            seq = layer.cumulative_length if layer.is_sliding else held
            if seq != n_past or held > n_past:
                return None
            start = n_past - held
            if held and not (
                self._holds(i, slot, keys, start, False) and self._holds(i, slot, layer.values, start, True)
            ):
                self.keys[i][slot, :, start:n_past].copy_(keys[0])
                self.values[i][slot, :, start:n_past].copy_(layer.values[0])
            starts.append(start)
        return starts


class _SlotLayer(DynamicLayer):
    """One layer of a pass: writes the rows' new keys into their slots, gives attention
    the pass's rows [B, Hkv, W, D] (every row's positions 0 .. W - 1)."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, where, rows: torch.Tensor, width: int) -> None:
        super().__init__()
        self.buf_keys, self.buf_values, self.where, self.rows_idx, self.width = keys, values, where, rows, width
        self.dtype, self.device, self.is_initialized = keys.dtype, keys.device, True
        # what the model reads for its own bookkeeping (the length); no memory behind it
        self.keys = self.values = torch.zeros(1, 1, 1, 1, dtype=keys.dtype).expand(
            len(rows), keys.shape[1], width, keys.shape[3]
        )

    def update(self, key_states, value_states, *args, **kwargs):  # [B, Hkv, K, D] each
        self.buf_keys[self.where] = key_states.transpose(1, 2)  # [B, K, Hkv, D] into (slot, position) pairs
        self.buf_values[self.where] = value_states.transpose(1, 2)
        keys = self.buf_keys[:, :, : self.width].index_select(0, self.rows_idx)  # [B, Hkv, W, D]
        values = self.buf_values[:, :, : self.width].index_select(0, self.rows_idx)
        return keys, values


def _padded(attend: torch.Tensor, k: int) -> torch.Tensor:
    """A row's [k_b, k_b] attend in the top-left corner of a [k, k] False matrix."""
    extra = k - attend.shape[0]
    return torch.nn.functional.pad(attend, (0, extra, 0, extra)) if extra else attend


class SlotPass:
    """One pass's rows in their slots: the batch cache's layers, the mask, and ``commit``,
    which points each run's cache at its slot, grown by its new tokens."""

    def __init__(self, slots: SlotCache, rows: list[int], lengths: list[int], starts, slots_new: int, width: int):
        self.cache, self.rows, self.lengths, self.starts = slots, rows, lengths, starts
        self.slots_new, self.width = slots_new, width
        index = torch.tensor(rows, dtype=torch.long)
        positions = torch.tensor(lengths, dtype=torch.long)[:, None] + torch.arange(slots_new)  # [B, K]
        where = (index[:, None].expand(-1, slots_new), slice(None), positions)
        self.layers = [_SlotLayer(slots.keys[i], slots.values[i], where, index, width) for i in range(slots.n_layers)]

    def mask(self, geo, window: int | None) -> torch.Tensor:  # [B, 1, K, W] bool
        """Row b's query j (its j-th new token) sees its cached positions [0, L_b) and its new
        keys at L_b + j' as its ``attend`` allows (a sliding layer: within the window); a pad
        query sees only its own slot.  Built for all rows at once: a row by row build was
        about ten small ops per row, 600 for a pass of 30 rows and its two layer types."""
        K, W = self.slots_new, self.width
        past = torch.tensor([g[0] for g in geo], dtype=torch.long)  # [B] L_b
        real = torch.arange(K)[None, :] < torch.tensor([len(g[1]) for g in geo])[:, None]  # [B, K] not a pad
        pos = pad_sequence([g[1] for g in geo], batch_first=True)  # [B, k_max]
        pos = torch.nn.functional.pad(pos, (0, K - pos.shape[1]))  # [B, K]; a pad's position only ever meets itself
        # [B, K, K]: query j sees new key j' (a pad query: only itself)
        new = torch.stack([_padded(g[2], K) for g in geo]) | (torch.eye(K, dtype=torch.bool) & ~real[:, :, None])
        cached = torch.arange(W)  # [W]: a cached key's slot is its position
        seen = (cached[None, None, :] < past[:, None, None]) & real[:, :, None]  # [B, K, W]
        if window is not None:
            seen &= (pos[:, :, None] - cached[None, None, :]) < window
            new = new & ((pos[:, :, None] - pos[:, None, :]) < window)
        columns = (past[:, None] + torch.arange(K)[None, :])[:, None, :].expand(-1, K, -1)  # [B, K, K]: slot of key j'
        return seen.scatter_(2, columns, new).unsqueeze(1)

    def commit(self, caches: list, new_counts: list[int]) -> None:
        """Each run's cache now holds its new tokens: views of its slot, as long as a plain
        ``update`` would have left them."""
        c = self.cache
        for cache, slot, n_past, k, starts in zip(caches, self.rows, self.lengths, new_counts, self.starts):
            end = n_past + k
            for i, layer in enumerate(cache.layers):
                start = starts[i]
                if not layer.is_initialized:
                    layer.lazy_initialization(c.keys[i][:1, :, :0], c.values[i][:1, :, :0])
                if layer.is_sliding:
                    layer.cumulative_length = end
                    if not layer.record_past:  # as its own update: the last W - 1 only
                        start = max(start, end - layer.sliding_window + 1)
                layer.keys = c._row_keys[i][slot].narrow(2, start, end - start)
                layer.values = c._row_values[i][slot].narrow(2, start, end - start)
