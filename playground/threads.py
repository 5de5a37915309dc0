"""How many cores a thread's torch calls use, and which thread keeps OpenMP's helpers.

torch's CPU kernels run in parallel with OpenMP (libgomp in the PyPI wheels).  The first
parallel kernel a Python thread runs gives that thread its own *team*: n − 1 helper threads
that OpenMP keeps, parked, for as long as the thread lives.  Between two kernels a helper
first spins, then sleeps; but once the process holds more helpers than it has cores,
libgomp stops the spinning (a few hundred cycles at most), and every kernel then waits for
its helper to wake.  A decoder pass is about 1,500 small kernels.  Measured on the 2-vCPU
machine (Gemma 3 270M, one pass of 30 rows, interleaved runs): the decoder took 72 ms with
one team in the process and 104 ms once one more idle team existed anywhere (the thread that
loaded the model, a gradio thread that had served a request); thirty idle teams were no
worse.  ``OMP_WAIT_POLICY=PASSIVE`` (helpers never spin) puts every process in that slow
case, so the app no longer sets it.

So one thread at a time computes with every core: a run that is alone, or the scheduler's
worker while runs share its passes (it reads their logits on one core, ``on_one_core``,
while runs it has let go work on the other).  A run whose passes the worker runs does its
own small work (a draw, its records) on one core and gives its team back (``one_core``); a
thread that is done computing gives its team back too (``release_team``), so that an idle
thread does not keep the next one from spinning.  A team given back comes back at the thread's next
parallel kernel.

What a run computes on one core is its own small work; the kernels whose outputs it
compares with a run alone (its p rows, read by the worker) run where they ran before, and
``tests/serving`` checks that a seed gives the same tokens and trace shared or alone.
Where libgomp is not found (another OpenMP runtime, a torch built without one, a platform
without ``/proc``), every function here does nothing.

This module does not decide when a thread computes alone (``playground.decoding.target``
and ``playground.serving.scheduler`` do).
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache

import torch

# GNU OpenMP only (torch's PyPI wheels on Linux): its pause gives back the calling thread's
# helpers alone.  Intel's and LLVM's pause the process's whole runtime, which other threads
# may be using at that moment.
_OMP_NAMES = ("libgomp",)
_PAUSE_SOFT = 1  # omp_pause_soft: free the calling thread's helpers, keep the runtime
_local = threading.local()  # this thread's count before one_core(), while it is in one_core mode


def configure_threads() -> int:
    """Use every core this process may run on (``SPECPLAY_THREADS`` overrides, e.g. for tests)."""
    env = os.environ.get("SPECPLAY_THREADS")
    if env and env.isdigit() and int(env) > 0:
        n = int(env)
    else:
        try:
            n = len(os.sched_getaffinity(0))
        except AttributeError:  # pragma: no cover - non-Linux
            n = os.cpu_count() or 1
    torch.set_num_threads(max(1, n))
    return n


@cache
def _runtime() -> tuple[ctypes.CDLL | None, ctypes.CDLL | None]:
    """(the OpenMP runtime torch loaded, the library holding MKL's per-thread setting), or None each."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if line.rstrip().endswith((".so", ".so.1", ".so.5"))}
    except OSError:  # not Linux
        return None, None
    omp = mkl = None
    for path in sorted(paths):
        name = os.path.basename(path)
        try:
            if omp is None and name.startswith(_OMP_NAMES):
                lib = ctypes.CDLL(path)
                if hasattr(lib, "omp_set_num_threads") and hasattr(lib, "omp_pause_resource_all"):
                    lib.omp_set_num_threads.argtypes = [ctypes.c_int]
                    lib.omp_get_max_threads.restype = ctypes.c_int
                    lib.omp_pause_resource_all.argtypes = [ctypes.c_int]
                    omp = lib
            elif mkl is None and name.startswith("libtorch_cpu"):
                lib = ctypes.CDLL(path)
                if hasattr(lib, "MKL_Set_Num_Threads_Local"):  # the C interface (lower case is Fortran's: a pointer)
                    lib.MKL_Set_Num_Threads_Local.argtypes = [ctypes.c_int]
                    lib.MKL_Set_Num_Threads_Local.restype = ctypes.c_int
                    mkl = lib
        except OSError:  # pragma: no cover - a library that cannot be opened twice
            continue
    return omp, mkl


def available() -> bool:
    """Whether libgomp was found (otherwise every function here does nothing)."""
    return _runtime()[0] is not None


def release_team() -> None:
    """Give back this thread's parked OpenMP helpers (its next parallel kernel starts new ones)."""
    omp, _ = _runtime()
    if omp is not None:
        omp.omp_pause_resource_all(_PAUSE_SOFT)


def one_core() -> None:
    """From now on this thread's torch calls run on one core, and its helpers are given back.

    Only this thread changes (OpenMP's and MKL's per-thread settings; ``torch.set_num_threads``
    would also change the count every new thread starts with).  ``all_cores`` undoes it."""
    omp, mkl = _runtime()
    if omp is None or getattr(_local, "saved", None) is not None:
        return
    _local.saved = torch.get_num_threads()  # also makes torch set up this thread's count first
    omp.omp_set_num_threads(1)
    if mkl is not None:
        mkl.MKL_Set_Num_Threads_Local(1)
    release_team()


def all_cores() -> None:
    """Undo ``one_core``: this thread's torch calls use the count it had before (its helpers
    start again at its next parallel kernel).  Nothing to undo: does nothing."""
    omp, mkl = _runtime()
    saved = getattr(_local, "saved", None)
    if omp is None or saved is None:
        return
    _local.saved = None
    omp.omp_set_num_threads(saved)
    if mkl is not None:
        mkl.MKL_Set_Num_Threads_Local(0)  # 0: back to the process's setting


@contextmanager
def on_one_core() -> Iterator[None]:
    """Inside the block this thread's torch calls run on one core; its helpers stay parked,
    for its next parallel kernel after the block.

    The scheduler's worker reads the runs' logits this way while the runs it has let go do
    their own work: a parallel kernel waits for its slowest thread, and the worker's helper
    shares the other core with thirty runs' threads.  (The kernels of a read give the same
    bits on one core as on many: each row is reduced by one thread either way;
    ``tests/decoding/test_batch_probs.py`` checks it.)"""
    omp, mkl = _runtime()
    if omp is None:
        yield
        return
    count = omp.omp_get_max_threads()
    omp.omp_set_num_threads(1)
    mkl_count = mkl.MKL_Set_Num_Threads_Local(1) if mkl is not None else None  # returns the previous one
    try:
        yield
    finally:
        omp.omp_set_num_threads(count)
        if mkl is not None:
            mkl.MKL_Set_Num_Threads_Local(mkl_count)


def done_computing() -> None:
    """A thread has finished its run: back to every core, and no parked helpers kept."""
    all_cores()
    release_team()
