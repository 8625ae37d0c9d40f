"""The DataNode benchmarks' --trace: one line per sample from the Java agent's STATS."""

import contextlib
import io
import time

from benchmarks.agent_trace import _Counts, trace_line, tracing
from vnode_sync.datanode.channel import Counters, Stats
from vnode_sync.kernel.backend import VolumeQueue


def test_a_trace_line_gives_rates_waits_and_each_volumes_queue():
    stats = Stats(1, 2, Counters(), {"u1": Counters(read_bytes=30_000_000, read_wait_ns=60_000_000),
                                     "u2": Counters(read_bytes=10_000_000)},
                  {"volumes": 1}, (VolumeQueue("DS-5f1c11aa-77", 2, 120e6, 3),))
    line = trace_line("wc-weights", 2.5, 0.1, stats, {"u1": _Counts(20_000_000, 50_000_000)},
                      {"alice": "u1", "bob": "u2"}, "read")
    assert line == ("wc-weights     2.5 s  alice   100.0 (waits 0.10)  bob   100.0 (waits 0.00)  "
                    "DS-5f1c11aa- depth 2 waiting 3  120.0 MB/s\n")


class _SlowFile(io.StringIO):
    """A file whose writes yield the GIL midway, as a real one's may: interleaved writes show."""

    def write(self, text: str) -> int:
        half = len(text) // 2
        super().write(text[:half])
        time.sleep(0.001)
        return half + super().write(text[half:])


def test_tracers_of_several_datanodes_sharing_one_file_write_whole_lines():
    stats = Stats(1, 2, Counters(), {"u1": Counters(write_bytes=1)}, {"volumes": 1},
                  (VolumeQueue("DS-1", 1, 1e6, 0),))

    class Channel:
        def stats(self) -> Stats:
            return stats

    out = _SlowFile()
    with contextlib.ExitStack() as traced:
        for dn in ("dn0", "dn1", "dn2"):
            traced.enter_context(tracing(Channel(), {"alice": "u1"}, "write", out, dn))
        time.sleep(0.5)
    lines = out.getvalue().splitlines()
    assert len(lines) >= 6
    assert all(line.split()[0] in {"dn0", "dn1", "dn2"} and line.endswith("MB/s") for line in lines), lines
