"""Aligned plain-text tables for human output."""

from collections.abc import Sequence


def render(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [list(map(str, headers))] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    numeric = [all(_is_number(r[i]) for r in cells[1:]) and len(cells) > 1 for i in range(len(headers))]
    lines = []
    for row in cells:
        lines.append("  ".join(c.rjust(w) if num else c.ljust(w)
                               for c, w, num in zip(row, widths, numeric)).rstrip())
    return "\n".join(lines)


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return text == "-"


def mb(bytes_per_second: float) -> str:
    """MB/s with 1 MB = 10^6 bytes, as the paper's figures use."""
    return f"{bytes_per_second / 1e6:.1f}"
