"""A model of one's own that shares a loaded model's weights: ``model_view``.

A loaded model is shared read-only by every run, lab check and benchmark in the process.
Code that must change a model while it uses it — transformers' early-exit assistant lowers
``config.num_hidden_layers`` while it drafts, assisted generation reads its draft settings
from the assistant's own ``generation_config``, a counter hooks the model's forward — gets a
view instead: an object of the model's own class, built on the meta device, whose config and
generation config are deep copies and whose decoder layer list is its own, holding the
loaded model's modules (embedding, decoder layers, norm, rotary embedding, LM head).  No
parameter is copied and the loaded model is not touched; what the caller writes on the view
(its config, generation config, hooks on the view itself or on its layer list) no other
user sees.  Hooks on the shared modules inside it would still fire for everyone: never put one
there.

``model_view(model, first, last)`` keeps only decoder layers first..last-1 (the early-exit
drafter's cut models).  This module does not load or copy weights.
"""

from __future__ import annotations

import copy

import torch
from torch import nn


def num_layers(model) -> int:
    return int(model.config.get_text_config().num_hidden_layers)


def decoder(model) -> nn.Module:
    """The causal LM's decoder (``model.model``, holding ``layers``)."""
    inner = getattr(model, "model", None)
    if inner is None or not isinstance(getattr(inner, "layers", None), nn.ModuleList):
        raise ValueError(f"a model view needs a causal LM with .model.layers; {type(model).__name__} has none")
    return inner


def model_view(model, first: int = 0, last: int | None = None) -> nn.Module:
    """Decoder layers first..last-1 of ``model`` (all by default) in an object of its class
    with its own config, generation config and layer list, holding the model's own modules."""
    inner = decoder(model)
    last = num_layers(model) if last is None else last
    cfg = copy.deepcopy(model.config)
    cfg.num_hidden_layers = last - first
    if getattr(cfg, "layer_types", None) is not None:
        cfg.layer_types = list(cfg.layer_types)[first:last]
    with torch.device("meta"):
        view = type(model)(cfg)
    view_inner = decoder(view)
    for name, module in inner.named_children():
        if name == "layers":
            view_inner.layers = nn.ModuleList(list(inner.layers)[first:last])
        else:
            setattr(view_inner, name, module)
    for name, module in model.named_children():
        if module is not inner:
            setattr(view, name, module)
    for name, t in list(view.named_parameters()) + list(view.named_buffers()):
        if t.is_meta:  # a module the model has and the rebuilt object did not get
            raise ValueError(f"model view: {name} was not taken from the model ({type(model).__name__})")
    view.generation_config = copy.deepcopy(model.generation_config)
    for own in (view, view_inner, view_inner.layers):  # not .eval(): it would set every shared module's flag too
        own.training = False
    return view
