# The course's single entry point. Two commands matter to a new user:
#   make book   build the book into _build/html (creates .venv on first use)
#   make test   run every test (builds the book first: a warning is a failure)

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# Recreated whenever the pinned requirements or the package metadata change.
STAMP  := $(VENV)/.installed

.PHONY: book test release clean-book help

help:
	@echo "make book     build the book into _build/html"
	@echo "make test     build the book and run every test"
	@echo "make release  regenerate the student versions from solutions/"

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $@

book: $(STAMP)
	$(BIN)/jupyter-book build . --warningiserror --nitpick --keep-going

test: book
	$(BIN)/python -m pytest

release: $(STAMP)
	$(BIN)/python -m autograder release

clean-book:
	rm -rf _build
