"""Byte sizes as people and Hadoop's settings write them ("16K", "16M", "2G", "128m"); a module of its
own, so mpiio_test.py can import it without the harness (importing mpi4py's MPI makes a process an MPI
singleton, which breaks a later mpirun)."""

SIZE_SUFFIXES = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text: str) -> int:
    """'16K', '16M', '2G' (binary units) or plain bytes."""
    text = text.strip().upper().removesuffix("IB").removesuffix("B")
    if text and text[-1] in SIZE_SUFFIXES:
        return int(float(text[:-1]) * SIZE_SUFFIXES[text[-1]])
    return int(text)
