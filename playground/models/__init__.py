"""Model loading: presets' model pairs, the packaged GGUF conversion, the tiny in-process pairs.

``loading`` (pairs per preset, once per process), ``pair_cache`` (their memory-budgeted LRU),
``convert`` (GGUF → float32 safetensors, once), ``tiny`` / ``tiny_bytes`` (random pairs for tests
and the offline preset), ``device`` (CPU or GPU), ``hf_calls`` (transformers calls with their
warnings muted).  This package does not decode and does not build drafters.
"""
