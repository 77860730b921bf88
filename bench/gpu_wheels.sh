#!/usr/bin/env bash
# The wheels bench/gpu_check.sh needs on the lent GPU machine, whose python3 (3.12, torch 2.11)
# lacks bokeh, IPython & co. and whose numpy 2.5 breaks numba-cuda 0.30.4: run here once, then name
# `.whl` in the device tool's `carry`. The set that ran there on 2026-12-04 (35 MB); --no-deps, so
# each one's own needs are listed too.
set -euo pipefail
cd "$(dirname "$0")/.."
# .whl/ is in .gitignore (the device tool carries ignored paths named in `carry` only); no
# write to .git/info/exclude, which in a git worktree is no folder (.git is a file there)
mkdir -p .whl
git check-ignore -q .whl || { echo ".whl is not git-ignored: add /.whl/ to .gitignore" >&2; exit 1; }
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
    --platform any -d .whl \
    anywidget==0.11.0 asttokens==3.0.2 bokeh==3.9.2 comm==0.2.3 decorator==5.3.1 executing==2.3.0 \
    ipython==9.18.1 ipython_pygments_lexers==1.1.1 ipywidgets==8.1.9 jedi==0.20.1 \
    jupyter_bokeh==4.1.0 jupyterlab_widgets==3.0.17 lz4==4.4.5 matplotlib_inline==0.2.2 msgspec==0.23.0 \
    numpy==2.4.6 orjson==3.13.0 parso==0.8.7 pexpect==4.9.0 prompt_toolkit==3.0.53 \
    psygnal==0.16.1 ptyprocess==0.7.0 pure_eval==0.2.4 stack_data==0.6.3 tornado==6.6.1 \
    traitlets==5.16.1 wcwidth==0.9.4 widgetsnbextension==4.0.16 xyzservices==2026.9.1
ls .whl
