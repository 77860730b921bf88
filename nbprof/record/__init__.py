"""Recording: nbprof.profile and its backends, the only modules that import torch or numba.cuda.

:mod:`.profiler` is ``nbprof.profile``. Each backend turns torch on and off and hands back raw records
(plain columns or torch's own record objects); :mod:`.convert` turns those into a :class:`nbprof.Trace`,
with :mod:`.match_events` (legacy ops to Kineto's), :mod:`.own_cuda_calls` (the profiler's own CUDA
calls, left out of the view), :mod:`.gpu_clock` (anchors and drift) and :mod:`.overhead` (what
profiling cost), :mod:`.distributed` (a rank's identity under torchrun, written into the meta).
Imports the model and nothing else of nbprof's.

- :mod:`.native`: nbprof's own RecordFunction observer (C++, built on first use into a keyed cache):
  every thread's ops on the CPU at under half Kineto's cost, read back as numpy columns; the CPU
  recorder wherever it builds (``recorder="auto"``), torch's path otherwise.
- :mod:`.kineto_cpu`: Kineto with every thread recorded (and CUPTI's kernels where asked).
- :mod:`.cuda_events`: on a GPU, Kineto first and then the seed's mechanism, a CUDA event pair per
  op (legacy profiler, ``ProfilerState.CUDA``), anchored on the devices in use; stopped in reverse.
- :mod:`.cuda_graphs`: a CUDA graph capture pauses the event profiler; a replay is a range.
- :mod:`.cuda_init`: CUDA initialised inside a profile (torch.cuda._lazy_init) becomes a slice.
- :mod:`.torch_profilers`: never inside a torch profiler; hands over to one started inside.
- :mod:`.calibrate`: what one recorded op costs under the profilers that are on.
- :mod:`.forks`: forked children (DataLoader workers) record and print nothing.
- :mod:`.quiet`: keeps Kineto's USDT start/stop lines out of stderr (a notebook shows them red).
- :mod:`.python_frames` (pure): which of ``with_stack``'s Python frames are the user's; cells named
  "cell [n]" (convert keeps only the user's frames and the threads that ran something).
- :mod:`.threads`: names of the OS threads that ran ops, including threads that ended early.
- :mod:`.interrupts`: holds Ctrl-C back while torch's profiler is switched on or off.
- :mod:`.numba_launches`: numba.cuda launches as ``numba::`` slices (swaps numba's launch path
  while recording); :mod:`.numba_gpu` their GPU intervals (torch's record_function on the
  launch's stream, or numba's events and an anchor); :mod:`.numba_rows` their args and Trace rows;
  :mod:`.numba_names` (pure) CUPTI kernel names back to launches.
"""
