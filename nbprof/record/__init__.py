"""Recording backends: the only modules that import torch or numba.cuda.

Each backend turns torch on and off and hands back raw records (plain columns or torch's own record
objects); :mod:`nbprof.convert` turns those into a :class:`nbprof.Trace`.

- :mod:`.kineto_cpu`: Kineto's CPU profiling with every thread recorded (no GPU).
- :mod:`.cuda_events`: the seed's mechanism, a CUDA event pair per op (legacy profiler,
  ``ProfilerState.CUDA``), with the Kineto duration-only fallback where a torch lacks it.
- :mod:`.quiet`: keeps Kineto's USDT start/stop lines out of stderr (a notebook shows them red).
- :mod:`.threads`: names of the OS threads that ran ops, including threads that ended early.
- :mod:`.interrupts`: holds Ctrl-C back while torch's profiler is switched on or off.
- :mod:`.numba_launches`: numba.cuda launches as ``numba::`` slices (swaps numba's launch path
  while recording); :mod:`.numba_gpu` their GPU intervals (torch's record_function on the
  launch's stream, or numba's events and an anchor); :mod:`.numba_rows` their args and Trace rows;
  :mod:`.numba_names` (pure) CUPTI kernel names back to launches.
"""
