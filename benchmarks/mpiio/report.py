"""Result files for one experiment: CSV (every measurement), markdown table, PNG plot."""

import csv
import os
from collections.abc import Callable, Sequence

from benchmarks.mpiio.machine import TestbedRecord

RESULTS_DIR = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "results"))


def write_csv(path: str, rows: Sequence[dict]) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def markdown_table(header: Sequence[str], rows: Sequence[Sequence]) -> str:
    def cell(v) -> str:
        return f"{v:.2f}" if isinstance(v, float) else str(v)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def write_markdown(path: str, title: str, testbed: TestbedRecord, command: str, runtime_s: float,
                   sections: Sequence[tuple[str, str]]) -> None:
    parts = [f"# {title}", "", f"Command: `{command}` (ran {runtime_s:.0f} s)", "",
             markdown_table(("testbed", ""), testbed.as_rows()), ""]
    for heading, body in sections:
        parts += [f"## {heading}", "", body, ""]
    with open(path, "w") as f:
        f.write("\n".join(parts))


def write_plot(path: str, draw: Callable) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig = draw(plt)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
