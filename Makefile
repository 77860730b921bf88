# The README's commands. Each sets up .venv itself on a fresh machine.
PYTHON ?= python3
# Pinned: an unpinned torch pulls a multi-GB CUDA build. Override: make test TORCH_SPEC=torch==2.14.1
TORCH_SPEC ?= torch==2.13.0
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(subst =,,$(subst >,,$(subst <,,$(TORCH_SPEC))))
CHROMIUM := /usr/bin/chromium

.PHONY: demo demo-ddp test bench bench-quick lab chromium clean

$(STAMP): pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[test]" "$(TORCH_SPEC)"
	touch $@

# Debian's Chromium for the browser tests (Playwright's own browser download fails here).
$(CHROMIUM):
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium

chromium: $(CHROMIUM)

demo: $(STAMP)
	$(VENV)/bin/nbprof run -o out/demo.html --trace out/demo.json.gz --table kernels/train_mlp.py

# Two ranks of a DDP job (gloo on the CPU), each profiled, merged into one page and summarised.
demo-ddp: $(STAMP)
	rm -rf out/ddp
	$(VENV)/bin/torchrun --standalone --nproc-per-node 2 -m nbprof.cli run \
		-o "out/ddp/page.rank{rank}.html" --trace "out/ddp/traces/step.rank{rank}.json.gz" kernels/ddp_mlp.py --slow-rank 1
	$(VENV)/bin/nbprof view out/ddp/traces -o out/ddp.html
	$(VENV)/bin/nbprof ranks out/ddp/traces

test: $(STAMP) $(CHROMIUM)
	$(PY) -m pytest -q tests

bench: $(STAMP) $(CHROMIUM)
	$(PY) bench/run_all.py

# The headline figures in ~3 minutes (bench/quick.py): run it on every change to a hot path.
bench-quick: $(STAMP) $(CHROMIUM)
	$(PY) bench/quick.py

lab: $(STAMP)
	$(VENV)/bin/jupyter lab notebooks/

clean:
	rm -rf $(VENV) out test-artifacts bench/out
