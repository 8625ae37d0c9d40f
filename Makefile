# The two commands of the README. Both install what they need first (scripts/setup.sh).
VENV ?= .venv
PYTHON := $(VENV)/bin/python

.PHONY: setup demo test dist clean-leftovers

setup:
	bash scripts/setup.sh

demo: setup
	$(PYTHON) -m testbed.demo

test: setup
	$(PYTHON) -m pytest -ra --durations=15

# The released artifacts in dist/: the wheel, the DataNode agent's jar (setup builds it), a wheelhouse for
# each form (storage/compute node, coordinator), the Ansible roles' tarball and SHA256SUMS (scripts/dist.py).
dist: setup
	$(PYTHON) scripts/dist.py --out dist

clean-leftovers:
	$(PYTHON) -m testbed.leftovers --remove
