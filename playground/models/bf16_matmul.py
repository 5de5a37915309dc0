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
(``MIN_ROWS_*``) in float32, through oneDNN, and rounds the result to bfloat16:

    y = bf16( float32(x) @ float32(W)ᵀ )

A product of two bfloat16 numbers is exact in float32 and bfloat16 kernels accumulate in
float32, so this is the same sum a native kernel computes, in another order (a near tie
may round the other way, as between any two kernels in bfloat16).  One row (a plain
decoding step) keeps torch's own bfloat16 kernel.  The output embedding (the LM head,
vocab × hidden: 262k × 640 for Gemma 3, as many weights as the rest of the model) keeps a
float32 copy, held as a non-persistent buffer so that ``model_bytes`` and the memory
budget count it (671 MB for Gemma 3 270M); converting it at every pass would cost more
than the product.  The other layers' weights are small and are converted at each call.
Same passes after the change: 1 × 9 tokens 175–203 ms, 30 × 1 299–381 ms (the design:
docs/concepts/numerics.md, "CPUs without bfloat16 instructions").

``SPECPLAY_BF16_MATMUL`` overrides the choice: ``float32`` (always upcast), ``native``
(never), ``auto`` or unset (upcast where torch reports no native bfloat16 support).

This module does not choose a model's dtype, load models or know what a pass is.
"""

from __future__ import annotations

import os

import torch
import torch.nn.functional as F

_COPY = "weight_float32"  # the output embedding's float32 copy (a non-persistent buffer)
# Fewest rows a product runs in float32 (fewer: torch's bfloat16 kernel, which costs about one
# matrix-vector product per row).  Measured per layer shape (Gemma 3 270M's, AVX2): a layer
# converted at each call breaks even at 3 rows and gains from 4 (4 rows: 0.36 vs 0.53 ms for
# 1024 x 640); the LM head, whose float32 copy is kept, gains from 2 (52 vs 65 ms).
MIN_ROWS_CONVERTED = 4
MIN_ROWS_KEPT = 2


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


def _matmul_float32(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:  # [N, in] x [out, in] -> [N, out]
    """x @ wᵀ in float32: oneDNN where torch has it (about twice MKL's speed for a few rows
    on an AMD CPU), else torch's own product."""
    if torch.backends.mkldnn.is_available():
        try:
            return torch.ops.mkldnn._linear_pointwise(x, w, None, "none", [], "")
        except (AttributeError, RuntimeError):  # pragma: no cover - a torch without the op
            pass
    return F.linear(x, w)


class Float32RowsLinear(torch.nn.Linear):
    """An ``nn.Linear`` with bfloat16 weights whose products of more than one row run in
    float32 (``install`` gives an existing layer this class; its weights do not move)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.numel() // max(1, x.shape[-1])
        copy = getattr(self, _COPY, None)
        grad = torch.is_grad_enabled() and (x.requires_grad or self.weight.requires_grad)
        few = rows < (MIN_ROWS_KEPT if copy is not None else MIN_ROWS_CONVERTED)
        if few or grad or x.device.type != "cpu" or self.weight.dtype != torch.bfloat16:
            return super().forward(x)  # torch's bfloat16 kernel: about one matrix-vector product per row
        w = self.weight.float() if copy is None else copy  # [out, in] float32
        y = _matmul_float32(x.reshape(rows, x.shape[-1]).float(), w)  # [rows, out]
        if self.bias is not None:
            y = y + self.bias.float()
        return y.to(x.dtype).reshape(*x.shape[:-1], w.shape[0])


def install(model, force: bool | None = None) -> int:
    """Make ``model``'s bfloat16 linear layers compute multi-row products in float32 (see the
    module docstring); ``force`` overrides ``wanted()``.  Returns the bytes of the float32
    copies it added (0 when nothing changed).  Installing twice changes nothing more."""
    if not (wanted() if force is None else force):
        return 0
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    added = 0
    for module in model.modules():
        if type(module) is not torch.nn.Linear or module.weight.dtype != torch.bfloat16:
            continue  # another kind of layer, float32, or already installed
        if module.weight.device.type != "cpu":
            continue
        if module is head:
            module.register_buffer(_COPY, module.weight.detach().float(), persistent=False)
            added += getattr(module, _COPY).untyped_storage().nbytes()
        module.__class__ = Float32RowsLinear
    return added
