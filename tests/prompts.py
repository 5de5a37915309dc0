"""Prompt lists shared by several test modules.

* ``TINY_PROMPTS``: greedy-equality prompts for the tiny character-level pair (a sentence,
  one character, code with a newline).
* ``BENCH_PROMPTS``: two tiny benchmark prompts, one that repeats itself ("grounded") and
  one that does not ("general").
"""

from tools.bench import BenchPrompt

TINY_PROMPTS = ["The capital of France is", "a", "def f(x):\n    return x * x\n"]

BENCH_PROMPTS = (
    BenchPrompt("copy", "grounded", "Repeat after me: the cat sat on the mat. the cat sat on the mat."),
    BenchPrompt("open", "general", "Hello there, how are"),
)
