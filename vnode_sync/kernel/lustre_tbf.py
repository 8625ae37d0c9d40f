"""Lustre OSS enforcement through NRS TBF: one TBF rule per active user on `ost.OSS.ost_io`.

What Lustre offers (lustre/ptlrpc/nrs_tbf.c; Lustre manual, "Network Request Scheduler"):
- `lctl set_param ost.OSS.ost_io.nrs_policies="tbf uid"` starts the TBF policy keyed by uid;
  `nrs_tbf_rule` takes `start NAME uid={500} rate=R`, `change NAME rate=R`, `stop NAME`.
- A rate is RPCs per second, not bytes (LU-20184 asks for bytes), and each CPU partition
  (CPT) of the service keeps its own copy of every rule: the ceiling for one user is
  rate x partitions (LU-17158). Rule names are 1..15 characters from [A-Za-z0-9_]
  (`check_rule_name`, MAX_TBF_NAME = 16 with the NUL); rates must be 1..999999.
- `get_param nrs_tbf_rule` lists, per queue and per CPT, "NAME {500} 40, ref 1" for the
  typed policies and "NAME uid={500} 40, ref 1" for the generic `tbf` policy.

Nothing here has run against a real Lustre; see docs/lustre.md for what was checked.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import time
from dataclasses import dataclass, field
from typing import Callable

import yaml

from vnode_sync.durable import write_atomically
from vnode_sync.errors import InvalidArgument, KernelError, Unsupported
from vnode_sync.kernel.backend import DEFAULT_VNODE, HELD_ESTIMATED, VNodeUsage, is_vnode_name, user_of_vnode
from vnode_sync.kernel.lustre_settings import DEFAULT_SERVICE, LustreSettings
from vnode_sync.kernel.types import DeviceLimits, DeviceNumber, IoCounters

log = logging.getLogger(__name__)

RULE_NAME_MAX = 15            # MAX_TBF_NAME (16) less the NUL, nrs_tbf.c check_rule_name
RATE_MAX = 999_999            # LPROCFS_NRS_RATE_MAX is 1000000, exclusive (older releases: 65535)
DEFAULT_RPC_BYTES = 4 << 20   # 4 MiB bulk RPCs, the default brw_size since Lustre 2.9
_RULE_NAME = re.compile(r"[A-Za-z0-9_]+")


class LctlError(KernelError):
    """`lctl` refused a parameter read or write (non-zero exit)."""

    def __init__(self, param: str, message: str, returncode: int | None = None):
        super().__init__(param, message)
        self.returncode = returncode


class RuleCollision(KernelError):
    """A TBF rule with the name vnode-sync wants exists and is not one vnode-sync started."""

    def __init__(self, service: str, name: str, found: str):
        super().__init__(f"{service}.nrs_tbf_rule",
                         f"rule {name!r} exists ({found}) and was not started by vnode-sync; "
                         f"rename or stop the site's rule, or set lustre.rule_prefix to another prefix")
        self.name = name
        self.found = found


# ---- value types: each parses and prints what lctl shows -------------------------------------

POLICIES = {
    # config name -> (argument to nrs_policies, key used in rule expressions)
    "uid": ("tbf uid", "uid"),
    "jobid": ("tbf jobid", "jobid"),
    "generic": ("tbf", "uid"),
}


@dataclass(frozen=True)
class RuleMatch:
    """What a rule matches: one key (uid, jobid, ...) and its list, e.g. uid={500}."""

    key: str
    values: tuple[str, ...]

    @classmethod
    def parse(cls, text: str) -> "RuleMatch":
        m = re.fullmatch(r"(\w+)=\{([^{}]*)\}", text.strip())
        if not m or not m.group(2).split():
            raise InvalidArgument(f"TBF expression {text!r} is not KEY={{VALUE ...}}")
        return cls(m.group(1), tuple(m.group(2).split()))

    def __str__(self) -> str:
        return f"{self.key}={{{' '.join(self.values)}}}"

    def listed(self, generic: bool) -> str:
        """How `nrs_tbf_rule` prints it: the whole expression for `tbf`, the braces for `tbf uid`."""
        return str(self) if generic else "{" + " ".join(self.values) + "}"


@dataclass(frozen=True)
class TbfRule:
    """One line of the rule list: "NAME {500} 40, ref 1" or "NAME uid={500} 40, ref 1"."""

    name: str
    expression: str   # as listed: "{500}", "uid={500}", "{*}", "*"
    rate: int         # RPCs/s in this CPU partition
    ref: int = 0      # TBF classes (clients) bound to the rule in this partition, less one

    _LINE = re.compile(r"(?P<name>\S+) (?P<expr>.+) (?P<rate>\d+), ref (?P<ref>-?\d+)")

    @classmethod
    def parse(cls, line: str) -> "TbfRule":
        m = cls._LINE.fullmatch(line.strip())
        if not m:
            raise InvalidArgument(f"TBF rule line {line!r} is not 'NAME EXPRESSION RATE, ref N'")
        return cls(m["name"], m["expr"], int(m["rate"]), int(m["ref"]))

    def __str__(self) -> str:
        return f"{self.name} {self.expression} {self.rate}, ref {self.ref}"


@dataclass(frozen=True)
class RuleList:
    """The whole `nrs_tbf_rule` text: queue ("regular"/"high_priority") -> CPT -> rules, newest first."""

    queues: dict[str, dict[int, tuple[TbfRule, ...]]]

    _QUEUE = {"regular_requests:": "regular", "high_priority_requests:": "high_priority"}

    @classmethod
    def parse(cls, text: str) -> "RuleList":
        queues: dict[str, dict[int, list[TbfRule]]] = {}
        queue = cpt = None
        for raw in text.splitlines():
            line = raw.strip()
            if not line:
                continue
            if line in cls._QUEUE:
                queue, cpt = cls._QUEUE[line], None
                queues[queue] = {}
            elif m := re.fullmatch(r"CPT (\d+):", line):
                if queue is None:
                    raise InvalidArgument(f"TBF rule list: {line!r} before a queue header")
                cpt = int(m.group(1))
                queues[queue][cpt] = []
            elif queue is None or cpt is None:
                raise InvalidArgument(f"TBF rule list: rule line {line!r} outside a CPT section")
            else:
                queues[queue][cpt].append(TbfRule.parse(line))
        return cls({q: {c: tuple(rules) for c, rules in cpts.items()} for q, cpts in queues.items()})

    def __str__(self) -> str:
        out = []
        for queue, header in (("regular", "regular_requests:"), ("high_priority", "high_priority_requests:")):
            if queue not in self.queues:
                continue
            out.append(header)
            for cpt, rules in sorted(self.queues[queue].items()):
                out.append(f"CPT {cpt}:")
                out.extend(str(r) for r in rules)
        return "\n".join(out) + "\n"

    def partitions(self) -> list[int]:
        return sorted(self.queues.get("regular", {}))

    def views(self, name: str) -> dict[tuple[str, int], TbfRule | None]:
        """Each (queue, CPT) and the rule called `name` there, or None where it is missing."""
        return {(q, c): next((r for r in rules if r.name == name), None)
                for q, cpts in self.queues.items() for c, rules in cpts.items()}

    def names(self) -> set[str]:
        return {r.name for cpts in self.queues.values() for rules in cpts.values() for r in rules}

    def is_generic(self) -> bool | None:
        """True for the generic `tbf` policy ("default * N"), False for a typed one ("default {*} N")."""
        for rules in self.queues.get("regular", {}).values():
            for rule in rules:
                if rule.name == "default":
                    return not rule.expression.startswith("{")
        return None


@dataclass(frozen=True)
class PolicyState:
    """One entry of `nrs_policies` (YAML): the policy name and its state in one queue."""

    queue: str
    name: str
    state: str

    @classmethod
    def parse_all(cls, text: str) -> list["PolicyState"]:
        doc = yaml.safe_load(text) or {}
        return [cls(queue.replace("_requests", ""), str(p.get("name")), str(p.get("state")))
                for queue in ("regular_requests", "high_priority_requests")
                for p in (doc.get(queue) or [])]


@dataclass(frozen=True)
class JobStat:
    """One job of `obdfilter.<OST>.job_stats`: bytes and RPC counts (samples) each way."""

    job_id: str
    read_bytes: int = 0
    write_bytes: int = 0
    read_rpcs: int = 0
    write_rpcs: int = 0

    @classmethod
    def parse_all(cls, text: str) -> list["JobStat"]:
        doc = yaml.safe_load(text) or {}
        stats = []
        for job in doc.get("job_stats") or []:
            # "read"/"write" in Lustre before 2.7, "read_bytes"/"write_bytes" since
            read = job.get("read_bytes") or job.get("read") or {}
            write = job.get("write_bytes") or job.get("write") or {}
            stats.append(cls(str(job["job_id"]), int(read.get("sum", 0)), int(write.get("sum", 0)),
                             int(read.get("samples", 0)), int(write.get("samples", 0))))
        return stats


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


def rule_name_for(prefix: str, user: str, uid: int) -> str:
    """`vnode_<user>` when it is a valid TBF rule name, else `vnode_<uid>`.

    TBF names allow only [A-Za-z0-9_] and 15 characters; Linux user names may hold '-'
    or be longer. User names never start with a digit, so the uid form cannot collide.
    """
    name = prefix + user
    if _RULE_NAME.fullmatch(name) and len(name) <= RULE_NAME_MAX:
        return name
    name = f"{prefix}{uid}"
    if len(name) > RULE_NAME_MAX:
        raise InvalidArgument(f"TBF rule name {name!r} is longer than {RULE_NAME_MAX} characters; "
                              f"use a shorter lustre.rule_prefix than {prefix!r}")
    return name


# ---- the lctl seam ------------------------------------------------------------------------------

@dataclass
class Lctl:
    """Runs the `lctl` binary with argv lists (never a shell). Point `path` at a stand-in in tests."""

    path: str = "lctl"
    timeout: float = 10.0

    def _run(self, param: str, argv: list[str]) -> str:
        try:
            done = subprocess.run([self.path, *argv], capture_output=True, text=True, timeout=self.timeout)
        except FileNotFoundError as e:
            raise LctlError(param, f"cannot run {self.path!r}: {e.strerror}") from e
        except subprocess.TimeoutExpired as e:
            raise LctlError(param, f"{self.path} did not answer within {self.timeout} s") from e
        if done.returncode != 0:
            message = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
            raise LctlError(param, message, done.returncode)
        return done.stdout

    def get_param(self, param: str) -> str:
        return self._run(param, ["get_param", "-n", param])

    def set_param(self, param: str, value: str) -> None:
        self._run(param, ["set_param", f"{param}={value}"])


# ---- ownership ledger -----------------------------------------------------------------------------

@dataclass(frozen=True)
class OwnedRule:
    name: str
    vnode: str
    uid: int
    match: RuleMatch


class RuleLedger:
    """The rules vnode-sync started, kept in a JSON file so a restarted agent knows them.

    Without a path the ledger lives in memory only (tests, one-shot runs).
    """

    def __init__(self, path: str | None = None):
        self.path = path
        self.rules: dict[str, OwnedRule] = {}
        if path and os.path.exists(path):
            with open(path) as f:
                for name, entry in json.load(f).items():
                    self.rules[name] = OwnedRule(name, entry["vnode"], int(entry["uid"]),
                                                 RuleMatch.parse(entry["match"]))

    def record(self, rule: OwnedRule) -> None:
        self.rules[rule.name] = rule
        self._save()

    def forget(self, name: str) -> None:
        if self.rules.pop(name, None) is not None:
            self._save()

    def by_vnode(self, vnode: str) -> OwnedRule | None:
        return next((r for r in self.rules.values() if r.vnode == vnode), None)

    def _save(self) -> None:
        if not self.path:
            return
        write_atomically(self.path, json.dumps({n: {"vnode": r.vnode, "uid": r.uid, "match": str(r.match)}
                                                for n, r in sorted(self.rules.items())}, indent=1).encode(), 0o600)


# ---- the backend -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class LimitState:
    """Whether a user is being held at its limit, estimated from Lustre's own counters.

    Lustre reports no per-uid throttle hits (sites ask for it: lustre-discuss, Oct 2021,
    "the UIDs that have reached the rate limit"). The estimate: the user's RPC rate from
    job_stats samples over the last interval, against the rule's rate times the CPU
    partitions where the rule has TBF classes bound (`ref` > 0 in the rule list).
    """

    vnode: str
    rule: str
    rate_per_partition: int
    active_partitions: int
    measured_rpcs_per_s: float
    held: bool


@dataclass
class _Sample:
    at: float
    rpcs: int


@dataclass
class LustreTbfBackend:
    lctl: Lctl
    targets: dict[str, DeviceNumber] = field(default_factory=dict)   # OST name -> its block device
    service: str = DEFAULT_SERVICE
    policy: str = "uid"
    rpc_bytes: int | None = None          # None: read obdfilter.<OST>.brw_size, else 4 MiB
    rule_prefix: str = "vnode_"
    jobid_rule: str = "*.{uid}"           # jobid policy: the job ids of a uid (jobid_name "%e.%u")
    jobid_uid: str = r".*\.(?P<uid>\d+)"  # job_stats: where the uid sits in a job id
    ledger: RuleLedger = field(default_factory=RuleLedger)
    hit_fraction: float = 0.9
    clock: Callable[[], float] = time.monotonic

    name = "lustre-tbf"
    placer = None  # nothing to move: OSS I/O threads are shared kernel threads; rules match by uid

    def __post_init__(self):
        # Values from the config are checked by LustreSettings; this guards direct construction.
        if self.policy not in POLICIES:
            raise InvalidArgument(f"TBF policy {self.policy!r} is not one of {', '.join(POLICIES)}")
        self._jobid_uid = re.compile(self.jobid_uid)
        self._uid_of: dict[str, int] = {}
        self._wanted: dict[str, list[DeviceLimits]] = {}
        self._conversion: dict[str, RateConversion] = {}
        self._rate_set: dict[str, int] = {}   # the per-CPT rate this agent last wrote
        self._samples: dict[str, _Sample] = {}
        self._rpcs: dict[str, tuple[int, int]] = {}   # (read, write) RPCs at the last usage read
        self._mix: dict[str, IoMix] = {}              # each user's latest read/write mix
        self.notes: list[str] = []          # decisions worth reporting (drift restored, clamping)

    @classmethod
    def from_settings(cls, subtree: str, settings: LustreSettings) -> "LustreTbfBackend":
        from vnode_sync.kernel.devices import device_number
        ledger = settings.ledger
        if ledger is None:
            ledger = os.path.join("/var/lib/vnode-sync", f"{subtree}.lustre-tbf-rules.json")
        return cls(lctl=Lctl(settings.lctl), targets={ost: device_number(dev) for ost, dev in settings.targets.items()},
                   service=settings.service, policy=settings.policy, rpc_bytes=settings.rpc_bytes,
                   rule_prefix=settings.rule_prefix, jobid_rule=settings.jobid_rule, jobid_uid=settings.jobid_uid,
                   ledger=RuleLedger(ledger or None), hit_fraction=settings.hit_fraction)

    def limitations(self) -> list[str]:
        return [
            "TBF limits RPCs/s per user on the OSS's ost_io service, not bytes: the rate assumes "
            "full-size bulk RPCs, so small or unaligned I/O gets fewer bytes than its share",
            "one TBF bucket counts reads and writes together: the rule's rate is the most the user's "
            "recent mix of reads and writes can do within both its read and its write share (the "
            "smaller of the two until its first I/O is seen), taken at each reconcile",
            "rates apply per CPU partition (LU-17158); the rate is divided by the partition count so "
            "the total can never exceed the share, but a user whose RPCs reach fewer partitions "
            "(e.g. one client node) gets proportionally less",
            "OSS I/O threads (ll_ost_io_*) are kernel threads serving every user: there is nothing to "
            "place, so members/place/release do nothing; rules match requests by uid",
            "on OSTs the TBF uid comes from the RPC's obdo (o_uid), which clients fill from the file "
            "owner for quota; I/O to another user's files may count against the owner (not verified "
            "on a real Lustre; the jobid policy matches the process instead)",
            "the default VNode is left to the site's TBF 'default' rule; iops and BFQ weights have "
            "no TBF equivalent and are ignored",
            "rules are per OSS; nothing in Lustre coordinates them across servers, the coordinator does",
        ]

    # -- reading Lustre ------------------------------------------------------------------------------

    def _param(self, leaf: str) -> str:
        return f"{self.service}.{leaf}"

    def rule_list(self) -> RuleList:
        return RuleList.parse(self.lctl.get_param(self._param("nrs_tbf_rule")))

    def partitions(self) -> int:
        count = len(self.rule_list().partitions())
        if count == 0:
            raise KernelError(self._param("nrs_tbf_rule"), "lists no CPU partition: is TBF started?")
        return count

    def bulk_rpc_bytes(self) -> int:
        """The largest bulk RPC the OSTs accept (brw_size, MiB); larger RPCs mean a lower rate.

        Read once per agent run: brw_size changes only by an administrator's hand.
        """
        if self.rpc_bytes:
            return self.rpc_bytes
        sizes = []
        for ost in self.targets:
            try:
                sizes.append(int(self.lctl.get_param(f"obdfilter.{ost}.brw_size").split()[0]) << 20)
            except (LctlError, ValueError, IndexError):
                continue
        self.rpc_bytes = max(sizes, default=DEFAULT_RPC_BYTES)
        return self.rpc_bytes

    # -- LimitEnforcer ---------------------------------------------------------------------------------

    def setup(self) -> None:
        """Start `tbf uid` (or the configured type) unless TBF already runs; never restart it.

        Restarting TBF would drop every rule, the site's included, so a TBF of another type
        is refused rather than replaced.
        """
        wanted_arg, _ = POLICIES[self.policy]
        states = PolicyState.parse_all(self.lctl.get_param(self._param("nrs_policies")))
        tbf = [s for s in states if s.name.split()[0] == "tbf" and s.state == "started"]
        if not tbf:
            log.info("starting NRS policy %r on %s", wanted_arg, self.service)
            self.lctl.set_param(self._param("nrs_policies"), wanted_arg)
            return
        generic = self.rule_list().is_generic()
        if generic is not None and generic != (self.policy == "generic"):
            running = "tbf (generic)" if generic else "a typed tbf (uid/gid/jobid/nid/opcode)"
            raise Unsupported(f"{self.service}: TBF already runs as {running}, lustre.policy is "
                              f"{self.policy!r} ({wanted_arg!r}); vnode-sync will not restart TBF, "
                              f"which would drop the site's rules")

    def vnodes(self) -> list[str]:
        return sorted(r.vnode for r in self.ledger.rules.values())

    def ensure_vnode(self, vnode: str, uid: int | None = None) -> None:
        """Record the user's uid; the rule itself needs a rate, so apply_limits starts it."""
        if vnode == DEFAULT_VNODE:
            return
        if not is_vnode_name(vnode):
            raise InvalidArgument(f"{vnode!r} is not a VNode name")
        if uid is None or uid < 0:
            raise InvalidArgument(f"VNode {vnode}: a TBF rule needs the user's uid (0 or more), got {uid}")
        self._uid_of[vnode] = uid
        rule_name_for(self.rule_prefix, user_of_vnode(vnode) or "", uid)

    def _rule_name(self, vnode: str) -> str:
        owned = self.ledger.by_vnode(vnode)
        if owned is not None:
            return owned.name
        return rule_name_for(self.rule_prefix, user_of_vnode(vnode) or "", self._uid_of[vnode])

    def _match(self, uid: int) -> RuleMatch:
        _, key = POLICIES[self.policy]
        value = self.jobid_rule.format(uid=uid) if key == "jobid" else str(uid)
        return RuleMatch(key, (value,))

    def limits(self, vnode: str) -> dict[DeviceNumber, DeviceLimits]:
        """The limits last applied, if the rule in Lustre still carries the rate they gave."""
        conversion = self._conversion.get(vnode)
        owned = self.ledger.by_vnode(vnode)
        if conversion is None or owned is None:
            return {}
        views = self.rule_list().views(owned.name)
        if all(r is not None and r.rate == conversion.per_partition for r in views.values()):
            return {d.device: d for d in self._wanted.get(vnode, [])}
        return {}

    def apply_limits(self, vnode: str, limits: list[DeviceLimits]) -> None:
        """Make the user's rule carry the rate its shares convert to; restore hand edits."""
        if vnode == DEFAULT_VNODE:
            return
        if vnode not in self._uid_of:
            raise InvalidArgument(f"VNode {vnode}: ensure_vnode(vnode, uid) must come before apply_limits")
        self._wanted[vnode] = list(limits)
        target = combined_target(limits, self._mix.get(vnode))
        name = self._rule_name(vnode)
        match = self._match(self._uid_of[vnode])
        if target is None:
            self._conversion.pop(vnode, None)
            self._stop_owned(vnode)
            return
        rules = self.rule_list()
        conversion = RateConversion.of(target, self.bulk_rpc_bytes(), len(rules.partitions()) or 1)
        if conversion.clamped and self._conversion.get(vnode) != conversion:
            self._note(f"{vnode}: {conversion}")
        self._conversion[vnode] = conversion
        self._converge(vnode, name, match, conversion.per_partition, rules)

    def _converge(self, vnode: str, name: str, match: RuleMatch, rate: int, rules: RuleList) -> None:
        views = rules.views(name)
        present = [r for r in views.values() if r is not None]
        owned = self.ledger.rules.get(name)
        if owned is None and present:
            raise RuleCollision(self.service, name, str(present[0]))
        generic = self.policy == "generic"
        foreign = [r for r in present if r.expression != match.listed(generic)]
        if foreign and owned is not None and all(r.expression == owned.match.listed(generic) for r in foreign):
            # Our rule with the user's previous uid: TBF cannot change a match, so replace it.
            log.info("TBF rule %s matches %s, now %s: restarting it", name, owned.match, match)
            self.lctl.set_param(self._param("nrs_tbf_rule"), f"stop {name}")
            self._start(vnode, name, match, rate)
            return
        if foreign:
            # TBF cannot change a rule's match in place: someone stopped ours and started theirs.
            raise RuleCollision(self.service, name, str(foreign[0]))
        if not present:
            if owned is not None:
                self._note(f"{vnode}: rule {name} was stopped outside vnode-sync; starting it again")
            self._start(vnode, name, match, rate)
        elif len(present) < len(views):
            missing = sorted(f"{q} CPT {c}" for (q, c), r in views.items() if r is None)
            self._note(f"{vnode}: rule {name} missing in {', '.join(missing)}; restarting it everywhere")
            self.lctl.set_param(self._param("nrs_tbf_rule"), f"stop {name}")
            self._start(vnode, name, match, rate)
        elif any(r.rate != rate for r in present):
            found = sorted({r.rate for r in present})
            if self._rate_set.get(vnode) is not None and found != [self._rate_set[vnode]]:
                self._note(f"{vnode}: rule {name} rate changed to {found} outside vnode-sync; restoring {rate}")
            self.lctl.set_param(self._param("nrs_tbf_rule"), f"change {name} rate={rate}")
            self._rate_set[vnode] = rate
            log.info("changed TBF rule %s to rate=%d per CPT on %s", name, rate, self.service)
        else:
            self._rate_set[vnode] = rate

    def _start(self, vnode: str, name: str, match: RuleMatch, rate: int) -> None:
        # Recorded first so a crash after the start still leaves the rule ours, not a "collision".
        self.ledger.record(OwnedRule(name, vnode, self._uid_of[vnode], match))
        try:
            self.lctl.set_param(self._param("nrs_tbf_rule"), f"start {name} {match} rate={rate}")
        except LctlError:
            self.ledger.forget(name)
            raise
        self._rate_set[vnode] = rate
        log.info("started TBF rule %s %s rate=%d per CPT on %s", name, match, rate, self.service)

    def _note(self, text: str) -> None:
        log.warning("%s", text)
        self.notes = [*self.notes[-99:], text]   # the last 100: an agent runs for months

    def _stop_owned(self, vnode: str) -> None:
        owned = self.ledger.by_vnode(vnode)
        if owned is None:
            return
        views = self.rule_list().views(owned.name)
        present = [r for r in views.values() if r is not None]
        if any(r.expression != owned.match.listed(self.policy == "generic") for r in present):
            self._note(f"{vnode}: rule {owned.name} now matches {present[0].expression}, not ours; "
                       f"leaving it and forgetting ownership")
        elif present:
            self.lctl.set_param(self._param("nrs_tbf_rule"), f"stop {owned.name}")
            log.info("stopped TBF rule %s on %s", owned.name, self.service)
        self.ledger.forget(owned.name)

    def commit(self, uids: dict[int, str], connections: dict[tuple[str, int], str]) -> None:
        """Nothing buffered: each rule change is an lctl call of its own."""

    def remove_vnode(self, vnode: str) -> None:
        self._stop_owned(vnode)
        for table in (self._uid_of, self._wanted, self._conversion, self._rate_set, self._samples, self._rpcs,
                      self._mix):
            table.pop(vnode, None)

    # -- usage and hits --------------------------------------------------------------------------------

    def _job_stats(self, ost: str) -> list[JobStat]:
        return JobStat.parse_all(self.lctl.get_param(f"obdfilter.{ost}.job_stats"))

    def _uid_of_job(self, job_id: str) -> int | None:
        m = self._jobid_uid.fullmatch(job_id)
        return int(m["uid"]) if m else None

    def _uid(self, vnode: str) -> int | None:
        owned = self.ledger.by_vnode(vnode)
        return self._uid_of.get(vnode, owned.uid if owned else None)

    def _counters(self, vnodes: list[str]) -> dict[str, dict[DeviceNumber, IoCounters]]:
        """Cumulative bytes and RPCs of each VNode's user per OST, from one job_stats read per OST.

        Job ids must carry the uid (jobid_var=procname_uid or jobid_name "%e.%u"/"%j.%u");
        job_stats entries expire after job_cleanup_interval, so counters can go down.
        """
        vnode_of_uid = {uid: vnode for vnode in vnodes if (uid := self._uid(vnode)) is not None}
        counters = {vnode: {dev: IoCounters() for dev in self.targets.values()} for vnode in vnode_of_uid.values()}
        for ost, dev in self.targets.items():
            for job in self._job_stats(ost):
                vnode = vnode_of_uid.get(self._uid_of_job(job.job_id))
                if vnode is not None:
                    c = counters[vnode][dev]
                    c.read_bytes += job.read_bytes
                    c.write_bytes += job.write_bytes
                    c.read_ios += job.read_rpcs
                    c.write_ios += job.write_rpcs
        return counters

    def usage(self) -> dict[str, VNodeUsage]:
        usage = {}
        for vnode, devices in self._counters(self.vnodes()).items():
            self._note_mix(vnode, devices)
            state = self.limit_state(vnode, devices)
            usage[vnode] = VNodeUsage(devices, held_at_limit=bool(state and state.held), held_source=HELD_ESTIMATED)
        return usage

    def _note_mix(self, vnode: str, devices: dict[DeviceNumber, IoCounters]) -> None:
        """The user's read/write mix since the last read, for the next rule rate (combined_target)."""
        now = (sum(c.read_ios for c in devices.values()), sum(c.write_ios for c in devices.values()))
        before = self._rpcs.get(vnode)
        self._rpcs[vnode] = now
        if before is not None and now[0] >= before[0] and now[1] >= before[1]:
            mix = IoMix.of(now[0] - before[0], now[1] - before[1])
            if mix is not None:
                self._mix[vnode] = mix

    def limit_state(self, vnode: str, counters: dict[DeviceNumber, IoCounters] | None = None) -> LimitState | None:
        """Is the user held at its limit? None until two samples exist or without an owned rule.

        `counters`: this VNode's counters when the caller has just read them (saves the lctl calls)."""
        owned = self.ledger.by_vnode(vnode)
        conversion = self._conversion.get(vnode)
        if owned is None or conversion is None:
            return None
        if counters is None:
            counters = self._counters([vnode]).get(vnode, {})
        rpcs = sum(c.read_ios + c.write_ios for c in counters.values())
        now = self.clock()
        previous = self._samples.get(vnode)
        self._samples[vnode] = _Sample(now, rpcs)
        if previous is None or now <= previous.at or rpcs < previous.rpcs:
            return None
        measured = (rpcs - previous.rpcs) / (now - previous.at)
        views = self.rule_list().views(owned.name)
        active = sum(1 for (queue, _), r in views.items() if queue == "regular" and r and r.ref > 0) or 1
        rate = conversion.per_partition
        return LimitState(vnode, owned.name, rate, active, measured,
                          held=measured >= self.hit_fraction * rate * active)

    def teardown(self) -> None:
        """Stop the rules vnode-sync started, and only those; TBF itself stays as the site had it."""
        for rule in list(self.ledger.rules.values()):
            self._stop_owned(rule.vnode)
