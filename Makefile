# The two commands of the README: `make demo` and `make test`. Both create and reuse .venv.
VENV      ?= .venv
PY        := $(VENV)/bin/python
STAMP     := $(VENV)/.installed
MANIFEST  ?= manifests/frozenlake-cpu.yaml
CORES     ?= 2
PYTEST_ARGS ?=

.PHONY: demo test venv system-deps clean-demo

venv: $(STAMP)

# torch==2.13.0 first: on this CPU path it is a local CPU build; the package itself asks only for a range. The ray extra
# is real Ray 2.49.2 for the tests of the per-job Ray heads (AGENTREPRO_RAY, or the venv's bin/ray on PATH).
$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[test,serving,vision,ray]'
	touch $(STAMP)

# System packages: WeasyPrint's libraries (the report's PDF) and what the tests drive for real (Chromium, a
# local SLURM, poppler): installed when we are root with apt; otherwise scripts/system-deps.sh says what is
# missing and those tests are skipped. `make demo` installs only the report's part.
system-deps:
	bash scripts/system-deps.sh

# The workflow freezes the study itself when it has no lock (and stops if a lock disagrees with the manifest).
demo: $(STAMP)
	bash scripts/system-deps.sh report
	PATH=$(abspath $(VENV))/bin:$$PATH $(VENV)/bin/snakemake --cores $(CORES) --config manifest=$(MANIFEST)

# The linter, the formatter and the type checker first (a minute): a test run that ends red on style is found before the suite.
test: $(STAMP) system-deps
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	PATH=$(abspath $(VENV))/bin:$$PATH $(PY) -m pytest $(PYTEST_ARGS)
