"""Benchmarks: our loop side by side with transformers' ``generate()``, on this machine.

    python -m tools bench [--preset P] [--prompts FILE] [--max-new-tokens N]
        [--gammas 2,4,8] [--temperatures 0] [--drafters prompt-lookup,...] [--dtype D[,D]]
        [--methods hf_generate,autoregressive,speculative,hf_assisted] [--repeats R]
        [--trace off|on|both] [--rules lossless[,block,typical]] [--json] [--out DIR]

Methods, all on the same prompts and the same loaded models, in one process:

* ``hf_generate``    transformers ``model.generate()`` (greedy or sampled): the peer;
* ``autoregressive`` our loop without a drafter: the baseline every speedup is against;
* ``speculative``    our loop, per drafter x gamma;
* ``hf_assisted``    transformers' assisted generation where it applies:
                     ``prompt_lookup_num_tokens=gamma``, ``assistant_model`` (two-model presets) and
                     ``assistant_early_exit=k`` (the early-exit drafter's layer k) and universal
                     assisted generation (``assistant_tokenizer``; the other-tokenizer drafter,
                     when both tokenizers are transformers tokenizers).

Runs are *interleaved*: for each repetition, each prompt, each temperature, every
method runs once, in an order rotated between prompts, so machine drift (this
machine is shared) hits all methods alike.  One unrecorded warm-up run per
method comes first.

Measured costs (the cost model: docs/concepts/algorithm.md, "The cost model"):
  t1      one target pass over 1 token (ms), from the interleaved autoregressive runs;
  c       drafter ms per drafted token / t1;
  v       v_gamma = one target pass over gamma+1 tokens / one over 1 token, timed directly
          back to back at the same cache length (prompt + max_new_tokens/2);
  predicted_speedup = E(alpha, gamma) / (gamma*c + v_gamma), alpha = measured acceptance rate;
  predicted_speedup_steps = the same model on the step mix that really happened (drafts per
          step vary for prompt lookup): tokens per target call / (drafted per step * c + v(k)).
  measured_over_predicted(_steps) = decode-phase speedup over our autoregressive loop /
          predicted_speedup(_steps); the _steps ratio isolates the loop's own overhead.

``--rules lossless,block`` times token and block verification side by side on the same drafts
(block rows are chains only: tree rows always use the lossless rule).

Rows are aggregated per (dtype, prompt kind, temperature, method, drafter, gamma, trace, rule):
ms_per_token is the mean over prompts of the median over repetitions of
end-to-end ms per new token (prefill included, as ``generate()`` is timed);
decode_ms_per_token counts from the end of the prefill pass (noted by a forward
hook on the target, the same way for transformers and for our loop) and divides by
the tokens made after it (generate()'s prefill pass also yields the first token;
ours stops one token short and feeds it in the first decode pass).

The package never imports gradio or ``visual``; pandas, plotly and tqdm are imported
inside the functions that need them.  One idea per module: ``options`` (settings and
records), ``measure`` (one timed run), ``run`` (the schedule), ``aggregate`` (rows),
``report`` (md/csv/json/html), ``cli`` (the command).
"""

from tools.bench.aggregate import aggregate, machine_info
from tools.bench.cli import build_parser, main, options_from_args
from tools.bench.measure import _CallCounter, _hf_run, _hf_tokenizers, measure_costs
from tools.bench.options import (
    BRANCHING,
    DEFAULT_PROMPTS,
    METHODS,
    ROW_FIELDS,
    RULES,
    TRACE_MODES,
    BenchError,
    BenchOptions,
    BenchPrompt,
    BenchReport,
    Costs,
    Progress,
    Run,
    Spec,
    load_prompts,
)
from tools.bench.report import (
    TABLE_COLUMNS,
    TREE_COLUMNS,
    build_figures,
    markdown_table,
    table_columns,
    write_outputs,
)
from tools.bench.run import _specs, iter_bench, run_bench

__all__ = [
    "BRANCHING",
    "DEFAULT_PROMPTS",
    "METHODS",
    "ROW_FIELDS",
    "RULES",
    "TABLE_COLUMNS",
    "TREE_COLUMNS",
    "TRACE_MODES",
    "BenchError",
    "BenchOptions",
    "BenchPrompt",
    "BenchReport",
    "Costs",
    "Progress",
    "Run",
    "Spec",
    "_CallCounter",
    "_hf_run",
    "_hf_tokenizers",
    "_specs",
    "aggregate",
    "build_figures",
    "build_parser",
    "iter_bench",
    "load_prompts",
    "machine_info",
    "main",
    "markdown_table",
    "measure_costs",
    "options_from_args",
    "run_bench",
    "table_columns",
    "write_outputs",
]
