"""From the coordinator's bytes/s to one TBF rate: TBF counts RPCs, per CPU partition, reads and
writes in one bucket (LU-20184, LU-17158)."""

from __future__ import annotations

from dataclasses import dataclass

from vnode_sync.errors import InvalidArgument
from vnode_sync.kernel.types import DeviceLimits

RATE_MAX = 999_999            # LPROCFS_NRS_RATE_MAX is 1000000, exclusive (older releases: 65535)


@dataclass(frozen=True)
class RateConversion:
    """Bytes/s from the coordinator as a per-partition TBF rate that never lets more through.

    A rule's rate applies in every CPU partition (LU-17158), so the most a user gets is
    rate x partitions RPCs/s, each of at most `rpc_bytes`. The per-partition rate is
    floor(target / (rpc_bytes x partitions)): rounding down keeps rate x partitions x
    rpc_bytes <= target. Below one RPC/s per partition Lustre cannot go (rate=0 is
    refused), so the rate is clamped to 1 and `clamped` says the target is exceeded.
    """

    target_bps: int
    rpc_bytes: int
    partitions: int
    per_partition: int
    clamped: bool = False

    @classmethod
    def of(cls, target_bps: int, rpc_bytes: int, partitions: int) -> "RateConversion":
        if target_bps <= 0:
            raise InvalidArgument(f"target {target_bps} B/s must be above 0 (0 means no limit: stop the rule)")
        if rpc_bytes <= 0:
            raise InvalidArgument(f"RPC size {rpc_bytes} B must be above 0")
        if partitions <= 0:
            raise InvalidArgument(f"CPU partition count {partitions} must be above 0")
        per = target_bps // (rpc_bytes * partitions)
        if per < 1:
            return cls(target_bps, rpc_bytes, partitions, 1, clamped=True)
        if per > RATE_MAX:
            return cls(target_bps, rpc_bytes, partitions, RATE_MAX, clamped=True)
        return cls(target_bps, rpc_bytes, partitions, per)

    @property
    def effective_bps(self) -> int:
        return self.per_partition * self.partitions * self.rpc_bytes

    def __str__(self) -> str:
        return (f"{self.target_bps} B/s / ({self.rpc_bytes} B x {self.partitions} CPTs) -> rate="
                f"{self.per_partition} per CPT = {self.effective_bps} B/s"
                + (" (clamped: Lustre cannot go lower)" if self.clamped and self.per_partition == 1 else ""))


@dataclass(frozen=True)
class IoMix:
    """The share of a user's recent RPCs that were reads and writes (they add up to 1)."""

    reads: float
    writes: float

    @classmethod
    def of(cls, read_rpcs: int, write_rpcs: int) -> "IoMix | None":
        total = read_rpcs + write_rpcs
        return cls(read_rpcs / total, write_rpcs / total) if total > 0 else None


def combined_target(limits: list[DeviceLimits], mix: IoMix | None = None) -> int | None:
    """The one byte rate a user's rule enforces on this OSS, or None for "no limit".

    One ost_io service serves every OST of the OSS, so per-device shares are summed. A TBF
    rule counts OST_READ and OST_WRITE RPCs in the same bucket (a uid rule has no direction),
    so the coordinator's separate read and write caps R and W become one: with the user's
    recent mix of reads r and writes w, the largest total that keeps r x total <= R and
    w x total <= W, i.e. min(R / r, W / w) over the directions it uses (a reader gets R, a
    writer W, however small its share in the other direction; the work-conserving policy
    gives an unused direction only a probe). Without a mix (no I/O seen yet) the smaller
    direction is used, so neither can exceed its cap. A direction with any unlimited (0)
    device share is unlimited.
    """
    limited = [d for d in limits if not d.is_unlimited()]
    if not limited:
        return None
    caps = {}
    for direction in ("read_bps", "write_bps"):
        values = [getattr(d, direction) for d in limited]
        if all(values):
            caps[direction] = sum(values)
    if not caps:
        return None
    if mix is None:
        return min(caps.values())
    totals = [cap / fraction for direction, cap in caps.items()
              if (fraction := mix.reads if direction == "read_bps" else mix.writes) > 0]
    return int(min(totals)) if totals else min(caps.values())
