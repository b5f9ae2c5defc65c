# The course's single entry point. Two commands matter to a new user:
#   make book   build the book into _build/html (creates .venv on first use)
#   make test   run every test (builds the book first: a warning is a failure), after
#               the Debian packages the tests need (.ci/system-packages)

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# Recreated whenever the pinned requirements or the package metadata change.
STAMP  := $(VENV)/.installed

.PHONY: book test bench system-packages release clean-book help

help:
	@echo "make book     build the book into _build/html"
	@echo "make test     build the book and run every test (installs the Debian packages they need as root;"
	@echo "              otherwise says what to install; SKIP_SYSTEM_PACKAGES=1 runs them without)"
	@echo "make release  regenerate the student versions from solutions/"
	@echo "make bench    measure the chapters' stated targets and print met or missed (an idle machine)"

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $@

book: $(STAMP)
	$(BIN)/jupyter-book build . --warningiserror --nitpick --keep-going

# The Debian packages of .ci/debian-packages.txt, checked before anything else: installed
# when run as root with apt-get, otherwise the command to install them, and a stop.
# `make test SKIP_SYSTEM_PACKAGES=1` goes on without them (their tests skip).
system-packages:
	@SKIP_SYSTEM_PACKAGES="$(SKIP_SYSTEM_PACKAGES)" .ci/system-packages

test: system-packages book
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python -m benchmarks

release: $(STAMP)
	$(BIN)/python -m autograder release

clean-book:
	rm -rf _build
