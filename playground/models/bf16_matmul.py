"""bfloat16 weights on a CPU without bfloat16 instructions: products of several rows in float32.

A CPU with AVX-512 BF16 or AMX multiplies bfloat16 matrices natively (oneDNN).  Without
them (AVX2-only CPUs: AMD Zen 2 and 3, most laptops) torch has two bfloat16 kernels: a
matrix-vector product for one row, which reads half the bytes of float32 and is the
fastest way to run one token, and a generic matrix-matrix product for more rows, which is
slow.  Measured on such a machine (2-vCPU AMD EPYC, AVX2, Gemma 3 270M, 64-token caches,
one pass with ``playground.decoding.batch_pass``): 1 row of 1 token 76 ms, 1 row of 9
tokens (a γ = 8 chain) 382 ms, 30 rows of 1 token 1,173 ms.  A verification pass then
costs 5× a plain step, which defeats speculative decoding, and a class's shared pass is
slower than its rows run one by one.

So on such a CPU every ``nn.Linear`` of a bfloat16 model computes a product of several rows
(``MIN_ROWS_KEPT`` or more) in float32, through oneDNN, and rounds the result to bfloat16:

    y = bf16( float32(x) @ float32(W)ᵀ )

A product of two bfloat16 numbers is exact in float32 and bfloat16 kernels accumulate in
float32, so this is the same sum a native kernel computes, in another order (a near tie
may round the other way, as between any two kernels in bfloat16).  One row (a plain
decoding step) keeps torch's own bfloat16 kernel.

Every such layer keeps its float32 weights, ``packed`` once in oneDNN's blocked layout for
products of a few rows, as a non-persistent buffer, so that ``model_bytes`` and the memory
budget count it (1,072 MB for Gemma 3 270M, two thirds of it the LM head: vocab × hidden,
262k × 640).  Converting at every call, or keeping the plain layout (which oneDNN re-blocks
at every product), costs more than the product.  Passes of Gemma 3 270M on the machine above
(``pass_costs``, 64-token caches, median of 5), converting the layers at each call and keeping
a plain copy of the head → every layer packed: 1 × 1 token 46 → 47 ms, 1 × 2 77 → 62,
1 × 3 87 → 67, 1 × 5 (a γ = 4 chain) 102 → 75, 1 × 9 126 → 88, 8 × 1 150 → 93, 30 × 1
233 → 204 (the design: docs/concepts/numerics.md, "CPUs without bfloat16 instructions").

``SPECPLAY_BF16_MATMUL`` overrides the choice: ``float32`` (always upcast), ``native``
(never), ``auto`` or unset (upcast where torch reports no native bfloat16 support).

This module does not choose a model's dtype, load models or know what a pass is.
"""

from __future__ import annotations

import os

import torch
import torch.nn.functional as F

_COPY = "weight_float32"  # a layer's packed float32 copy (a non-persistent buffer)
# Fewest rows a product runs in float32; one row keeps torch's bfloat16 kernel, a matrix-vector
# product that reads half the bytes (the LM head: 22 ms either way, 2 rows 39 vs 24 ms packed).
MIN_ROWS_KEPT = 2
PACKED_FOR_ROWS = 8  # the row count oneDNN blocks the copies for; 2-17 rows all gain from it


def native_bf16() -> bool:
    """Whether torch multiplies bfloat16 matrices natively on this CPU (oneDNN's check)."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # a torch built without oneDNN
        return False


def wanted() -> bool:
    """Whether bfloat16 models here should compute multi-row products in float32."""
    choice = (os.environ.get("SPECPLAY_BF16_MATMUL") or "auto").strip().lower()
    if choice not in ("auto", "float32", "native"):
        raise ValueError(f"SPECPLAY_BF16_MATMUL must be auto, float32 or native, not {choice!r}")
    return choice == "float32" or (choice == "auto" and not native_bf16())


def packed(w: torch.Tensor) -> torch.Tensor:
    """``w`` [out, in] float32 in oneDNN's own blocked layout for products of a few rows, or
    ``w`` itself where torch has no such layout.  For the LM head this is most of a verification
    pass: the plain layout is re-blocked at every product (2-9 rows: 40-57 ms on the machine in
    the module docstring), the packed one is not (24-37 ms; one row 22 ms either way).  The
    layout only moves the weights: oneDNN's products with either are bit-identical."""
    if torch.backends.mkldnn.is_available():
        try:
            return torch.ops.mkldnn._reorder_linear_weight(w, PACKED_FOR_ROWS)
        except (AttributeError, RuntimeError):  # pragma: no cover - a torch without the op
            pass
    return w


def _matmul_float32(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:  # [N, in] x [out, in] -> [N, out]
    """x @ wᵀ in float32: oneDNN where torch has it (about twice MKL's speed for a few rows
    on an AMD CPU), else torch's own product.  ``w`` may be ``packed``."""
    if w.layout == torch._mkldnn:  # packed: only oneDNN reads it
        return torch.ops.mkldnn._linear_pointwise(x, w, None, "none", [], "")
    if torch.backends.mkldnn.is_available():
        try:
            return torch.ops.mkldnn._linear_pointwise(x, w, None, "none", [], "")
        except (AttributeError, RuntimeError):  # pragma: no cover - a torch without the op
            pass
    return F.linear(x, w)


class Float32RowsLinear(torch.nn.Linear):
    """An ``nn.Linear`` with bfloat16 weights whose products of more than one row run in
    float32 on its kept copy (``install`` gives an existing layer this class and the copy;
    its weights do not move)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.numel() // max(1, x.shape[-1])
        grad = torch.is_grad_enabled() and (x.requires_grad or self.weight.requires_grad)
        if rows < MIN_ROWS_KEPT or grad or x.device.type != "cpu" or self.weight.dtype != torch.bfloat16:
            return super().forward(x)  # torch's bfloat16 kernel: about one matrix-vector product per row
        w = getattr(self, _COPY)  # [out, in] float32, packed
        y = _matmul_float32(x.reshape(rows, x.shape[-1]).float(), w)  # [rows, out]
        if self.bias is not None:
            y = y + self.bias.float()
        return y.to(x.dtype).reshape(*x.shape[:-1], self.out_features)


def tensor_bytes(t: torch.Tensor) -> int:
    """Bytes a tensor holds: its storage's, or for a ``packed`` (opaque) one, its elements'."""
    if t.layout == torch._mkldnn:
        return t.numel() * t.element_size()
    return t.untyped_storage().nbytes()


def install(model, force: bool | None = None) -> int:
    """Make ``model``'s bfloat16 linear layers compute multi-row products in float32 on a
    packed copy of their weights (see the module docstring); ``force`` overrides ``wanted()``.
    Returns the bytes of the float32 copies it added (0 when nothing changed).  Installing
    twice changes nothing more."""
    if not (wanted() if force is None else force):
        return 0
    added = 0
    for module in model.modules():
        if type(module) is not torch.nn.Linear or module.weight.dtype != torch.bfloat16:
            continue  # another kind of layer, float32, or already installed
        if module.weight.device.type != "cpu":
            continue
        copy = packed(module.weight.detach().float())
        module.register_buffer(_COPY, copy, persistent=False)
        added += tensor_bytes(copy)
        module.__class__ = Float32RowsLinear
    return added
