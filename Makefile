# The two commands of the README. Both install what they need first (scripts/setup.sh).
VENV ?= .venv
PYTHON := $(VENV)/bin/python

.PHONY: setup demo test clean-leftovers

setup:
	bash scripts/setup.sh

demo: setup
	$(PYTHON) -m testbed.demo

test: setup
	$(PYTHON) -m pytest -ra --durations=15

clean-leftovers:
	$(PYTHON) -m testbed.leftovers --remove
