"""How a bfloat16 model's linear layers multiply on a CPU: on copies of their weights kept
in oneDNN's blocked layout.

torch multiplies a bfloat16 ``nn.Linear`` through oneDNN, which takes the weights in its own
blocked layout and re-blocks the plain ``[out, in]`` tensor at every product.  For the few
rows of a decoding step that copy is most of the product: Gemma 3 270M's LM head (262,144 ×
640) takes 27-30 ms for 1-9 rows from the plain layout and 18-19 ms from a blocked copy, on a
2-vCPU Intel Xeon with AVX-512 BF16 and AMX.  So every bfloat16 linear layer keeps a second
copy of its weights, blocked once when the model loads, as a non-persistent buffer that
``model_bytes`` and the memory budget count.  What the copy holds depends on the CPU:

- **With native bfloat16 products** (AVX-512 BF16 or AMX: ``native_bf16()``), the copy is the
  bfloat16 weights blocked (``packed``): the same kernel family on the same numbers, only the
  layout moves.  Gemma 3 270M: +536 MB; passes on the machine above, 64-token caches, median
  of 5, plain → blocked: 1 row of 1 token 87-98 → 66 ms, 1 × 5 (a γ = 4 chain) 89-94 → 72,
  8 × 1 110-114 → 83-91, 30 × 1 168-175 → 146-154.  Products of more than ``MAX_PACKED_ROWS``
  rows (a long prompt) use torch's own kernel, which is as fast there.
- **Without them** (AVX2-only CPUs: AMD Zen 2 and 3, most laptops) torch has two bfloat16
  kernels: a matrix-vector product for one row, which reads half the bytes of float32 and is
  the fastest way to run one token, and a generic matrix-matrix product for more rows, which
  is slow.  Measured on such a machine (2-vCPU AMD EPYC, AVX2, Gemma 3 270M, 64-token caches,
  one pass with ``playground.decoding.batch_pass``): 1 row of 1 token 76 ms, 1 row of 9
  tokens (a γ = 8 chain) 382 ms, 30 rows of 1 token 1,173 ms.  A verification pass then
  costs 5× a plain step, which defeats speculative decoding, and a class's shared pass is
  slower than its rows run one by one.  So a product of several rows (``MIN_ROWS_KEPT`` or
  more) runs in float32 through oneDNN on a blocked float32 copy, rounded to bfloat16:

      y = bf16( float32(x) @ float32(W)ᵀ )

  A product of two bfloat16 numbers is exact in float32 and bfloat16 kernels accumulate in
  float32, so this is the same sum a native kernel computes, in another order (a near tie
  may round the other way, as between any two kernels in bfloat16).  One row (a plain
  decoding step) keeps torch's own bfloat16 kernel.  The copies take 1,072 MB for Gemma 3
  270M, two thirds of it the LM head.  Converting at every call, or keeping the plain
  layout, costs more than the product.  Passes on the machine above (``pass_costs``,
  64-token caches, median of 5), converting the layers at each call and keeping a plain copy
  of the head → every layer packed: 1 × 1 token 46 → 47 ms, 1 × 2 77 → 62, 1 × 3 87 → 67,
  1 × 5 102 → 75, 1 × 9 126 → 88, 8 × 1 150 → 93, 30 × 1 233 → 204 (the design:
  docs/concepts/numerics.md, "Blocked copies of the weights").

``SPECPLAY_BF16_MATMUL`` overrides the choice: ``packed`` (blocked bfloat16 copies),
``float32`` (float32 copies), ``native`` (no copies: torch's own kernels), ``auto`` or unset
(``packed`` where the CPU has native bfloat16 products, else ``float32``).

Gradients, float32 models and tensors off the CPU always take torch's own kernels.  This
module does not choose a model's dtype, load models or know what a pass is.
"""

from __future__ import annotations

import os

import torch
import torch.nn.functional as F

_COPY = "weight_float32"  # a layer's blocked float32 copy (CPUs without native bfloat16)
_PACKED = "weight_packed"  # a layer's blocked bfloat16 copy (CPUs with native bfloat16)
# Fewest rows a product runs in float32; one row keeps torch's bfloat16 kernel, a matrix-vector
# product that reads half the bytes (the LM head: 22 ms either way, 2 rows 39 vs 24 ms packed).
MIN_ROWS_KEPT = 2
PACKED_FOR_ROWS = 8  # the row count oneDNN blocks the copies for; 2-17 rows all gain from it
# Most rows a product takes from a blocked bfloat16 copy: up to 256 rows it is faster than
# torch's kernel (decoder layers 1.1-1.7 against 1.6-1.9 ms for 1-96 rows, 3.2 against 3.7 at
# 256), at 512 slower (6.6 against 5.8 ms), on the machine in the module docstring.
MAX_PACKED_ROWS = 256
MODES = ("auto", "packed", "float32", "native")


def native_bf16() -> bool:
    """Whether torch multiplies bfloat16 matrices natively on this CPU (oneDNN's check)."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # a torch built without oneDNN
        return False


def mode() -> str:
    """How bfloat16 models here multiply: ``packed``, ``float32`` or ``native`` (see the module
    docstring), from ``SPECPLAY_BF16_MATMUL`` and the CPU."""
    choice = (os.environ.get("SPECPLAY_BF16_MATMUL") or "auto").strip().lower()
    if choice not in MODES:
        raise ValueError(f"SPECPLAY_BF16_MATMUL must be auto, packed, float32 or native, not {choice!r}")
    if choice == "auto":
        return "packed" if native_bf16() else "float32"
    return choice


def packed(w: torch.Tensor) -> torch.Tensor:
    """``w`` [out, in] in oneDNN's own blocked layout for products of a few rows, or ``w`` itself
    where torch has no such layout.  For the LM head this is most of a verification pass: the
    plain layout is re-blocked at every product (on an AVX2 CPU 2-9 float32 rows took 40-57 ms,
    blocked 24-37 ms; one row 22 ms either way).  The layout only moves the weights: oneDNN's
    float32 products with either are bit-identical."""
    if torch.backends.mkldnn.is_available():
        try:
            return torch.ops.mkldnn._reorder_linear_weight(w, PACKED_FOR_ROWS)
        except (AttributeError, RuntimeError):  # pragma: no cover - a torch without the op
            pass
    return w


def _onednn(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """x [N, in] @ wᵀ (+ bias) through oneDNN, ``w`` blocked or plain: [N, out]."""
    return torch.ops.mkldnn._linear_pointwise(x, w, bias, "none", [], "")


def _matmul_float32(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:  # [N, in] x [out, in] -> [N, out]
    """x @ wᵀ in float32: oneDNN where torch has it (about twice MKL's speed for a few rows
    on an AMD CPU), else torch's own product.  ``w`` may be ``packed``."""
    if w.layout == torch._mkldnn:  # packed: only oneDNN reads it
        return _onednn(x, w)
    if torch.backends.mkldnn.is_available():
        try:
            return _onednn(x, w)
        except (AttributeError, RuntimeError):  # pragma: no cover - a torch without the op
            pass
    return F.linear(x, w)


def _own_kernel(layer: torch.nn.Linear, x: torch.Tensor) -> bool:
    """Whether ``layer(x)`` takes torch's own kernel: gradients, other dtypes or devices."""
    grad = torch.is_grad_enabled() and (x.requires_grad or layer.weight.requires_grad)
    return grad or x.device.type != "cpu" or layer.weight.dtype != torch.bfloat16 or x.dtype != torch.bfloat16


class Float32RowsLinear(torch.nn.Linear):
    """An ``nn.Linear`` with bfloat16 weights whose products of more than one row run in
    float32 on its kept copy (``install`` gives an existing layer this class and the copy;
    its weights do not move)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.numel() // max(1, x.shape[-1])
        if rows < MIN_ROWS_KEPT or _own_kernel(self, x):
            return super().forward(x)  # torch's bfloat16 kernel: about one matrix-vector product per row
        w = getattr(self, _COPY)  # [out, in] float32, packed
        y = _matmul_float32(x.reshape(rows, x.shape[-1]).float(), w)  # [rows, out]
        if self.bias is not None:
            y = y + self.bias.float()
        return y.to(x.dtype).reshape(*x.shape[:-1], self.out_features)


class PackedLinear(torch.nn.Linear):
    """An ``nn.Linear`` with bfloat16 weights whose products of up to ``MAX_PACKED_ROWS`` rows
    read its blocked bfloat16 copy (``install`` gives an existing layer this class and the
    copy; its weights do not move)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.numel() // max(1, x.shape[-1])
        if not 0 < rows <= MAX_PACKED_ROWS or _own_kernel(self, x):
            return super().forward(x)
        y = _onednn(x.reshape(rows, x.shape[-1]).contiguous(), getattr(self, _PACKED), self.bias)  # [rows, out]
        return y.reshape(*x.shape[:-1], self.out_features)


def tensor_bytes(t: torch.Tensor) -> int:
    """Bytes a tensor holds: its storage's, or for a ``packed`` (opaque) one, its elements'."""
    if t.layout == torch._mkldnn:
        return t.numel() * t.element_size()
    return t.untyped_storage().nbytes()


def install(model, how: str | None = None) -> int:
    """Give ``model``'s bfloat16 linear layers the copies ``how`` asks for (``packed``,
    ``float32`` or ``native``: none; default ``mode()``, see the module docstring).
    Returns the bytes of the copies it added (0 when nothing changed).  Installing twice
    changes nothing more."""
    how = mode() if how is None else how
    if how not in ("packed", "float32"):
        return 0
    name, cls = (_PACKED, PackedLinear) if how == "packed" else (_COPY, Float32RowsLinear)
    added = 0
    for module in model.modules():
        if type(module) is not torch.nn.Linear or module.weight.dtype != torch.bfloat16:
            continue  # another kind of layer, float32, or already installed
        if module.weight.device.type != "cpu":
            continue
        w = module.weight.detach()
        copy = packed(w) if how == "packed" else packed(w.float())
        if how == "packed" and copy is w:  # no blocked layout here: nothing to gain
            continue
        module.register_buffer(name, copy, persistent=False)
        added += tensor_bytes(copy)
        module.__class__ = cls
    return added
