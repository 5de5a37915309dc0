"""bfloat16 linear layers with blocked copies of their weights (playground.models.bf16_matmul).

The float32 copies (CPUs without native bfloat16) are checked on any CPU (``install(model,
"float32")``): which rows take which kernel, that the float32 path is the same sum as a
bfloat16 kernel up to one rounding, the packed copies and their bytes, and that float32
models, gradients and one-token steps are left alone.  The blocked bfloat16 copies (CPUs with
native bfloat16) are checked where oneDNN multiplies bfloat16."""

from __future__ import annotations

import pytest
import torch
from transformers import DynamicCache

from playground.decoding.batch_pass import RowPass, batched_forward
from playground.models import bf16_matmul
from playground.models.bf16_matmul import MAX_PACKED_ROWS, MIN_ROWS_KEPT, Float32RowsLinear, PackedLinear, install
from playground.models.loading import model_bytes
from tests.tiny_models import sliding_pair

needs_native = pytest.mark.skipif(
    not bf16_matmul.native_bf16(), reason="oneDNN multiplies bfloat16 natively only with AVX-512 BF16 or AMX"
)


class _WithHead(torch.nn.Module):
    """A layer and an LM head, as a causal LM exposes them."""

    def __init__(self, seed: int = 0, bias: bool = True) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.layer = torch.nn.Linear(48, 40, bias=bias).to(torch.bfloat16)
        self.head = torch.nn.Linear(40, 300, bias=False).to(torch.bfloat16)
        self.requires_grad_(False)

    def get_output_embeddings(self):
        return self.head


def _twin(seed: int = 0, bias: bool = True, how: str = "float32") -> tuple[_WithHead, _WithHead]:
    """Two identical modules; the second installed."""
    plain, fast = _WithHead(seed, bias), _WithHead(seed, bias)
    install(fast, how)
    return plain, fast


@pytest.fixture
def spy(monkeypatch):
    """The weights each float32 product was given (a product in torch's bfloat16 kernel adds none)."""
    seen: list[torch.Tensor] = []
    real = bf16_matmul._matmul_float32

    def record(x, w):
        seen.append(w)
        return real(x, w)

    monkeypatch.setattr(bf16_matmul, "_matmul_float32", record)
    return seen


def _float32_reference(layer: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """The exact sum in float64, rounded once to bfloat16: what any float32-accumulating
    bfloat16 kernel approximates."""
    y = x.double() @ layer.weight.double().T
    if layer.bias is not None:
        y = y + layer.bias.double()
    return y.to(torch.bfloat16)


def _ulps(a: torch.Tensor, b: torch.Tensor) -> float:
    """Largest difference in units of bfloat16's spacing at b's magnitude (8 bits of mantissa)."""
    spacing = torch.exp2(torch.floor(torch.log2(b.float().abs().clamp_min(1e-30))) - 7)
    return ((a.float() - b.float()).abs() / spacing).max().item()


@pytest.mark.parametrize("rows", [1, 2, 3, 4, 9, 30])
def test_every_layer_stays_within_one_rounding_of_the_exact_sum(rows):
    plain, fast = _twin(seed=rows)
    x = torch.randn(rows, 48).to(torch.bfloat16)
    with torch.inference_mode():
        for ours, theirs in ((fast.layer, plain.layer), (fast.head, plain.head)):
            h = x if ours is fast.layer else plain.layer(x)
            exact = _float32_reference(theirs, h)
            assert _ulps(ours(h), exact) <= 1.0, "more than one rounding away from the exact sum"
            assert _ulps(theirs(h), exact) <= 1.0  # torch's own bfloat16 kernel, for scale


def _dense(w: torch.Tensor) -> torch.Tensor:
    """A kept copy in the plain layout (a packed one is opaque)."""
    return w.to_dense() if w.layout == torch._mkldnn else w


def test_one_row_keeps_torchs_kernel_bit_for_bit(spy):
    plain, fast = _twin()
    x = torch.randn(1, 1, 48).to(torch.bfloat16)  # [B, K, in]: rows counts every token row
    with torch.inference_mode():
        assert torch.equal(fast.layer(x), plain.layer(x))
        assert torch.equal(fast.head(plain.layer(x)), plain.head(plain.layer(x)))
    assert spy == []  # no float32 product


@pytest.mark.parametrize("shape", [(MIN_ROWS_KEPT, 48), (2, 3, 48), (30, 1, 48)])
def test_many_rows_run_in_float32_rounded_once(shape, spy):
    """The float32 path is what runs: bit-equal to the float32 product of the upcast inputs
    in the plain layout, rounded once.  Mutants: a forgotten bias, a transposed weight, a
    product left in bfloat16 (torch's kernel) all fail here."""
    plain, fast = _twin()
    x = torch.randn(*shape).to(torch.bfloat16)
    with torch.inference_mode():
        w, b = plain.layer.weight.float(), plain.layer.bias.float()
        expected = (bf16_matmul._matmul_float32(x.reshape(-1, 48).float(), w) + b).to(torch.bfloat16)
        spy.clear()
        got = fast.layer(x)
        assert len(spy) == 1 and spy[0] is getattr(fast.layer, bf16_matmul._COPY)  # its kept copy
        fast.head(got)
    assert len(spy) == 2 and spy[1] is getattr(fast.head, bf16_matmul._COPY)
    assert got.shape == (*shape[:-1], 40) and got.dtype == torch.bfloat16
    assert torch.equal(got.reshape(-1, 40), expected)  # packed or plain layout: the same sums


def test_every_layer_keeps_a_float32_copy_and_it_is_counted():
    plain, fast = _twin(bias=False)
    for ours, theirs in ((fast.layer, plain.layer), (fast.head, plain.head)):
        copy = getattr(ours, bf16_matmul._COPY)
        assert copy.dtype == torch.float32 and torch.equal(_dense(copy), theirs.weight.float())
        assert isinstance(ours, Float32RowsLinear)
    assert model_bytes(fast) == model_bytes(plain) + (48 * 40 + 40 * 300) * 4  # the budget sees them
    assert bf16_matmul._COPY not in fast.state_dict()  # never saved with the weights


def test_installing_twice_or_not_at_all_changes_nothing_more():
    _, fast = _twin()
    assert install(fast, "float32") == 0 and install(fast, "packed") == 0  # already installed: no second copy
    untouched = _WithHead()
    assert install(untouched, "native") == 0
    assert type(untouched.layer) is torch.nn.Linear and not hasattr(untouched.head, bf16_matmul._COPY)


def test_float32_models_are_left_alone():
    model = _WithHead().float()
    assert install(model, "float32") == 0 and install(model, "packed") == 0
    assert type(model.layer) is torch.nn.Linear and type(model.head) is torch.nn.Linear


def test_gradients_still_flow_through_torchs_kernel():
    _, fast = _twin()
    fast.layer.requires_grad_(True)
    x = torch.randn(8, 48, dtype=torch.bfloat16, requires_grad=True)
    fast.layer(x).float().sum().backward()
    assert x.grad is not None and fast.layer.weight.grad is not None


@pytest.mark.parametrize(
    ("env", "native", "expected"),
    [
        (None, False, "float32"),
        (None, True, "packed"),
        ("auto", True, "packed"),
        (" Auto ", False, "float32"),
        ("float32", True, "float32"),
        ("packed", False, "packed"),
        ("native", False, "native"),
        ("native", True, "native"),
    ],
)
def test_the_choice_follows_the_cpu_and_the_override(monkeypatch, env, native, expected):
    if env is None:
        monkeypatch.delenv("SPECPLAY_BF16_MATMUL", raising=False)
    else:
        monkeypatch.setenv("SPECPLAY_BF16_MATMUL", env)
    monkeypatch.setattr(bf16_matmul, "native_bf16", lambda: native)
    assert bf16_matmul.mode() == expected


def test_a_bad_override_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("SPECPLAY_BF16_MATMUL", "fast")
    with pytest.raises(ValueError, match="auto, packed, float32 or native"):
        bf16_matmul.mode()


@pytest.mark.parametrize("how", ["float32", pytest.param("packed", marks=needs_native)])
def test_a_shared_pass_of_a_bfloat16_model_agrees_with_the_native_kernels(how):
    """A whole batched pass of a tiny bfloat16 Gemma 3 (sliding layers), installed or not: the
    same greedy tokens and logits within bfloat16's rounding (the kernels sum in other orders)."""
    target, _ = sliding_pair(window=4)
    plain = target.to(torch.bfloat16)
    fast = type(plain)(plain.config).to(torch.bfloat16)
    fast.load_state_dict(plain.state_dict())
    fast.requires_grad_(False)
    assert install(fast, how) > 0
    outs = []
    for model in (plain, fast):
        caches = [DynamicCache(config=model.config) for _ in range(5)]
        rows = [RowPass(c, tuple(range(3 + b, 9 + 2 * b)), keep=2) for b, c in enumerate(caches)]
        outs.append(batched_forward(model, rows))
    for a, b in zip(*outs):
        assert torch.allclose(a.logits.float(), b.logits.float(), atol=0.05, rtol=0.02)
        assert torch.equal(a.logits.argmax(-1), b.logits.argmax(-1))


# -- blocked bfloat16 copies (CPUs with native bfloat16 products) ------------------------------------


@pytest.fixture
def onednn_spy(monkeypatch):
    """The weights each oneDNN product was given (a product in torch's own kernel adds none)."""
    seen: list[torch.Tensor] = []
    real = bf16_matmul._onednn

    def record(x, w, bias=None):
        seen.append(w)
        return real(x, w, bias)

    monkeypatch.setattr(bf16_matmul, "_onednn", record)
    return seen


@needs_native
@pytest.mark.parametrize("shape", [(1, 48), (1, 1, 48), (5, 48), (2, 3, 48), (30, 1, 48), (MAX_PACKED_ROWS, 48)])
def test_packed_layers_read_their_blocked_copy_within_one_rounding(shape, onednn_spy):
    """Up to MAX_PACKED_ROWS rows the product reads the blocked bfloat16 copy: within one
    rounding of the exact sum, as torch's own kernel is.  Mutants: a forgotten bias, a weight
    of another layer, a product of the plain weights (no copy read) all fail here."""
    plain, fast = _twin(seed=shape[0], how="packed")
    x = torch.randn(*shape).to(torch.bfloat16)
    with torch.inference_mode():
        got = fast.layer(x)
        assert onednn_spy == [getattr(fast.layer, bf16_matmul._PACKED)]
        assert got.shape == (*shape[:-1], 40) and got.dtype == torch.bfloat16
        assert _ulps(got.reshape(-1, 40), _float32_reference(plain.layer, x.reshape(-1, 48))) <= 1.0
        head = fast.head(got)
        assert _ulps(head.reshape(-1, 300), _float32_reference(plain.head, got.reshape(-1, 40))) <= 1.0
    assert onednn_spy[1] is getattr(fast.head, bf16_matmul._PACKED)


@needs_native
def test_long_prompts_and_gradients_take_torchs_kernel(onednn_spy):
    plain, fast = _twin(how="packed")
    x = torch.randn(MAX_PACKED_ROWS + 1, 48).to(torch.bfloat16)
    with torch.inference_mode():
        assert torch.equal(fast.layer(x), plain.layer(x))
    assert onednn_spy == []
    fast.layer.requires_grad_(True)
    x = torch.randn(4, 48, dtype=torch.bfloat16, requires_grad=True)
    fast.layer(x).float().sum().backward()
    assert x.grad is not None and fast.layer.weight.grad is not None and onednn_spy == []


@needs_native
def test_every_layer_keeps_a_blocked_bfloat16_copy_and_it_is_counted():
    plain, fast = _twin(bias=False, how="packed")
    for ours, theirs in ((fast.layer, plain.layer), (fast.head, plain.head)):
        copy = getattr(ours, bf16_matmul._PACKED)
        assert copy.layout == torch._mkldnn and copy.dtype == torch.bfloat16
        assert torch.equal(copy.to_dense(), theirs.weight)  # the layout moves, the numbers stay
        assert isinstance(ours, PackedLinear) and torch.equal(ours.weight, theirs.weight)
    assert model_bytes(fast) == 2 * model_bytes(plain)  # the budget sees them
    assert bf16_matmul._PACKED not in fast.state_dict()  # never saved with the weights
