import re
import shutil

import pytest

from benchmarks import edge_model


@pytest.mark.skipif(not (shutil.which("mvn") and shutil.which("java")),
                    reason="needs Maven and a JDK (scripts/setup.d/datanode-throttle.sh)")
def test_two_seeds_print_one_line_each_then_every_figures_distribution_and_the_targets(capsys):
    assert edge_model.main(["--seeds", "0-1", "--seconds", "5", "--short-circuit", "off"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "# python -m benchmarks.edge_model --seeds 0-1 --seconds 5 --short-circuit off"
    assert [line.split()[:2] for line in out if line.startswith("seed ")] == [["seed", "0"], ["seed", "1"]]
    figures = [line for line in out if re.match(r"^(interactive p|backlogged rate|node throughput|a user alone)", line)]
    assert len(figures) == 6
    for line in figures:
        assert re.search(r"(\d+\s+(-?\d+\.\d{3}\s+){5}\s*seed \d+|\(none\))$", line), line
    assert re.match(r"^all\s+2 \|", out[-1]), out[-1]


def test_bad_seeds_are_one_clear_line_and_a_non_zero_exit(capsys):
    with pytest.raises(SystemExit) as exit_:
        edge_model.main(["--seeds", "9-x"])
    assert exit_.value.code != 0
    assert "--seeds 9-x: not N, N-M" in capsys.readouterr().err


def test_a_negative_read_ahead_piece_is_one_clear_line_and_a_non_zero_exit(capsys):
    with pytest.raises(SystemExit) as exit_:
        edge_model.main(["--seeds", "0", "--read-ahead-piece-kib", "-1"])
    assert exit_.value.code != 0
    assert "--read-ahead-piece-kib -1: must be >= 0" in capsys.readouterr().err


def test_the_read_ahead_goes_through_the_dispatcher_in_slices_of_the_volume_unless_asked_otherwise():
    def read_ahead(argv: list[str]) -> list[str]:
        args = edge_model.java_args(edge_model.parse(argv))
        at = args.index("--read-ahead")
        return args[at:at + 4]
    assert read_ahead(["--seeds", "0"]) == ["--read-ahead", "dispatched", "--read-ahead-piece-kib", "0"]
    assert read_ahead(["--seeds", "0", "--read-ahead", "window"])[:2] == ["--read-ahead", "window"]
    args = edge_model.java_args(edge_model.parse(["--seeds", "0"]))
    assert args[args.index("--packet-slots") + 1] == "on"   # read58c's packets' slots, as the agent takes them
