"""Questions asked of a Trace, answered as plain values: pure functions over its columns.

- :mod:`.averages`: ``key_averages`` and the summary table (torch's shape), busy time;
- :mod:`.steps`: training steps and where each one's time went; :mod:`.kernel_summary`: top kernels;
- :mod:`.gpu_agreement`: each op's CUDA-event interval against its kernels;
- :mod:`.findings`: one-line findings in plain words; :mod:`.diff`: two runs by op name and call path;
- :mod:`.callpaths`, :mod:`.range_summary`, :mod:`.tables`: call paths, an area selection's summary,
  the table answers as pandas DataFrames that print as text.

Imports the model and nothing else of nbprof's; never torch, bokeh or IPython (a test imports it
with those blocked); the timeline and the notebook draw what it returns.
"""
