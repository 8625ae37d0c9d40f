"""The tree step's benchmark at small sizes: it runs, prints its distributions (the definition, the groups, the
first yardstick and the exact reference against itself) and its cost ratio, refuses bad sizes."""

import subprocess
import sys

from tests.conftest import REPO


def test_it_prints_the_distributions_against_the_exact_and_the_cost_against_the_flat_step():
    done = subprocess.run([sys.executable, "-m", "benchmarks.tree_step", "--trees", "3", "--max-users", "8",
                           "--max-resources", "4", "--groups", "2", "--users", "10", "--resources", "20"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 1), done.stderr
    for line in ("the definition: every node / its exact total within its parent's bytes: min",
                 "groups: the root's children / the exact reference's", "users / the exact reference's users",
                 "the exact reference vs itself, first level 1e-06 lower", "worst tree by definition:",
                 "worst tree by users:", "tree / flat:", "target: every node >= 0.95 of the definition's exact total"):
        assert line in done.stdout, done.stdout


def test_bad_sizes_are_refused_in_one_line():
    done = subprocess.run([sys.executable, "-m", "benchmarks.tree_step", "--groups", "20", "--users", "10"],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].endswith("0 < --groups <= --users")
