# The course's single entry point. Two commands matter to a new user:
#   make book   build the book into _build/html (creates .venv on first use)
#   make test   run every test (builds the book first: a warning is a failure), after
#               the Debian packages the tests need (.ci/system-packages)

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# Recreated whenever the pinned requirements or the package metadata change.
STAMP  := $(VENV)/.installed

.PHONY: book book-en book-es translations test bench system-packages release clean-book help

help:
	@echo "make book     build the book into _build/html, and its Spanish edition into _build/html/es"
	@echo "make translations  update the Spanish catalogs (locales/es) after a change to the English pages"
	@echo "make test     build the book and run every test (installs the Debian packages they need as root;"
	@echo "              otherwise says what to install; SKIP_SYSTEM_PACKAGES=1 runs them without)"
	@echo "make release  regenerate the student versions from solutions/ (English, and Spanish in assignment/es/)"
	@echo "make bench    measure the chapters' stated targets and print met or missed (an idle machine)"

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $@

book: book-en book-es

book-en: $(STAMP)
	$(BIN)/jupyter-book build . --warningiserror --nitpick --keep-going

# The Spanish edition (book/translating.md): `jupyter-book build` does not pass
# `-D language`, so Sphinx builds it from the configuration that Jupyter Book generates
# (conf.py, not in git), with the same strictness and the catalogs of locales/es/. It
# executes the lessons itself, with COURSE_LANGUAGE=es (course/figure_words.py: the
# figures' words from locales/es/LC_MESSAGES/figures.po), into its own cache; a changed
# translation in figures.po, or a change to the hook, runs them again.
SPHINX_ES := PYTHONPATH=_ext $(BIN)/sphinx-build -c .
ES_CACHE  := _build/.jupyter_cache_es
FIGURES   := locales/es/LC_MESSAGES/figures.po

book-es: $(STAMP) book-en
	$(BIN)/jupyter-book config sphinx . >/dev/null
	@$(BIN)/python -m course.figure_words digest $(FIGURES) | cmp -s - $(ES_CACHE).digest \
	  || rm -rf $(ES_CACHE) $(ES_CACHE).digest _build/.doctrees-es
	COURSE_LANGUAGE=es $(SPHINX_ES) -b html -W -n --keep-going -q -D language=es \
	  -D nb_execution_cache_path=$(ES_CACHE) -d _build/.doctrees-es . _build/html/es
	$(BIN)/python -m course.figure_words digest $(FIGURES) > $(ES_CACHE).digest

# After a change to an English page or an assignment's Markdown: extract the messages (no
# notebook runs; the assignments' into _build/gettext/solutions/) and merge them into the
# Spanish catalogs; a changed sentence becomes a fuzzy entry to review. The grader's words,
# the catalogues' explanations and the test messages (autograder/reporting/language.py)
# into grader.pot, diagnoses/ and tests/, merged the same way. The figures'
# words come from the lessons that `make book-es` executed (figures.pot; none written,
# and figures.po left as it is, until that build is today's).
translations: $(STAMP)
	$(BIN)/jupyter-book config sphinx . >/dev/null
	$(SPHINX_ES) -b gettext -q -D nb_execution_mode=off -d _build/.doctrees-gettext . _build/gettext
	$(BIN)/python -m autograder.translation templates _build/gettext >/dev/null
	$(BIN)/python -m autograder.reporting.language templates _build/gettext >/dev/null
	$(BIN)/python -m course.figure_words template _build/gettext/figures.pot
	$(BIN)/sphinx-intl update -p _build/gettext -l es -d locales

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
