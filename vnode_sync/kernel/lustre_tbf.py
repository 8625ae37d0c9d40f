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

Here: the backend (the LimitEnforcer). Its parts: lustre_lctl (the seam), lustre_rules (what lctl
shows, parsed), lustre_rates (bytes/s to a TBF rate), lustre_ledger (which rules are ours),
lustre_jobs (a job's VNode: its rule on its Lustre job id ahead of its user's, its job_stats).

Nothing here has run against a real Lustre, so the backend is experimental: an agent runs it
only with `lustre.experimental: true` (docs/lustre.md says what was checked, and how).
"""

from __future__ import annotations

import logging
import os
import re
import time
from dataclasses import dataclass, field
from typing import Callable

from vnode_sync.errors import InvalidArgument, KernelError, Unsupported
from vnode_sync.kernel.backend import DEFAULT_VNODE, HELD_ESTIMATED, VNodeUsage, is_vnode_name, user_of_vnode
from vnode_sync.kernel.held import at_limit
from vnode_sync.kernel.lustre_lctl import Lctl, LctlError
from vnode_sync.kernel.lustre_jobs import JobStatCharging, LustreJob, folded_lines, is_job_vnode
from vnode_sync.kernel.lustre_ledger import OwnedRule, RuleLedger
from vnode_sync.kernel.lustre_rates import IoMix, RateConversion, combined_target
from vnode_sync.kernel.lustre_rules import (POLICIES, JobStat, PolicyState, RuleList, RuleMatch, job_rule_name,
                                            rule_name_for)
from vnode_sync.kernel.lustre_settings import DEFAULT_SERVICE, LustreSettings
from vnode_sync.kernel.types import DeviceCapacity, DeviceLimits, DeviceNumber, IoCounters, Shares

log = logging.getLogger(__name__)

DEFAULT_RPC_BYTES = 4 << 20   # 4 MiB bulk RPCs, the default brw_size since Lustre 2.9


class RuleCollision(KernelError):
    """A TBF rule with the name vnode-sync wants exists and is not one vnode-sync started."""

    def __init__(self, service: str, name: str, found: str):
        super().__init__(f"{service}.nrs_tbf_rule",
                         f"rule {name!r} exists ({found}) and was not started by vnode-sync; "
                         f"rename or stop the site's rule, or set lustre.rule_prefix to another prefix")
        self.name = name
        self.found = found


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
    jobid_job_rule: str = "{job}.{uid}"   # a job's Lustre job id (jobid_name "%j.%u")
    ledger: RuleLedger = field(default_factory=RuleLedger)
    clock: Callable[[], float] = time.monotonic

    name = "lustre-tbf"
    placer = None  # nothing to move: OSS I/O threads are shared kernel threads; rules match by uid
    shares_by_weight = False  # TBF caps rates: the coordinator's allocation is what it enforces
    shares_per_node = False
    volume_queues = ()      # no dispatcher of its own: the kernel or the file system queues

    def __post_init__(self):
        # Values from the config are checked by LustreSettings; this guards direct construction.
        if self.policy not in POLICIES:
            raise InvalidArgument(f"TBF policy {self.policy!r} is not one of {', '.join(POLICIES)}")
        self._jobid_uid = re.compile(self.jobid_uid)
        self._uid_of: dict[str, int] = {}
        self._jobs: dict[str, LustreJob] = {}   # job VNodes, by VNode
        self._wanted: dict[str, list[DeviceLimits]] = {}
        self._conversion: dict[str, RateConversion] = {}
        self._rate_set: dict[str, int] = {}   # the per-CPT rate this agent last wrote
        self._samples: dict[str, _Sample] = {}
        self._rpcs: dict[str, tuple[int, int]] = {}   # (read, write) RPCs at the last usage read
        self._mix: dict[str, IoMix] = {}              # each user's latest read/write mix
        self.notes: list[str] = []          # decisions worth reporting (drift restored, clamping)
        # One read of the rule list per reconcile pass (setup() to commit()): each VNode's step
        # reads its own rule from it; a rule this pass wrote is read again if asked for.
        self._pass_rules: RuleList | None = None
        self._written: set[str] = set()
        self._in_pass = False

    @classmethod
    def from_settings(cls, subtree: str, settings: LustreSettings) -> "LustreTbfBackend":
        from vnode_sync.kernel.devices import device_number
        ledger = settings.ledger
        if ledger is None:
            ledger = os.path.join("/var/lib/vnode-sync", f"{subtree}.lustre-tbf-rules.json")
        return cls(lctl=Lctl(settings.lctl), targets={ost: device_number(dev) for ost, dev in settings.targets.items()},
                   service=settings.service, policy=settings.policy, rpc_bytes=settings.rpc_bytes,
                   rule_prefix=settings.rule_prefix, jobid_rule=settings.jobid_rule, jobid_uid=settings.jobid_uid,
                   jobid_job_rule=settings.jobid_job_rule,
                   ledger=RuleLedger(ledger or None))

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
            "a job's VNode is a rule on its Lustre job id (lustre.jobid_job_rule) ahead of its user's with the "
            "jobid and generic policies; the uid policy cannot tell a job from its user, so there a job's share "
            "is added to its user's rule",
        ]

    def not_enforcing(self) -> str | None:
        return None

    def degraded(self) -> list[str]:
        return folded_lines(self._jobs.values(), self.jobid_job_rule)

    def set_capacities(self, capacities: list[DeviceCapacity]) -> None:
        """Rates come whole from the desired state; capacity is the coordinator's business."""

    # -- reading Lustre ------------------------------------------------------------------------------

    def _param(self, leaf: str) -> str:
        return f"{self.service}.{leaf}"

    def rule_list(self) -> RuleList:
        """The rule list as Lustre shows it now (one `lctl get_param`)."""
        return RuleList.parse(self.lctl.get_param(self._param("nrs_tbf_rule")))

    def _rules(self, *names: str | None) -> RuleList:
        """The rule list for a step of this pass: the pass's one read, unless one of the rules `names`
        was written since (then read again). Outside a pass, a fresh read."""
        if not self._in_pass:
            return self.rule_list()
        if self._pass_rules is None or any(n in self._written for n in names):
            self._pass_rules, self._written = self.rule_list(), set()
        return self._pass_rules

    def _set_rule(self, name: str, command: str) -> None:
        self._written.add(name)
        self.lctl.set_param(self._param("nrs_tbf_rule"), command)

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
        self._in_pass, self._pass_rules, self._written = True, None, set()
        wanted_arg, _ = POLICIES[self.policy]
        states = PolicyState.parse_all(self.lctl.get_param(self._param("nrs_policies")))
        tbf = [s for s in states if s.name.split()[0] == "tbf" and s.state == "started"]
        if not tbf:
            log.info("starting NRS policy %r on %s", wanted_arg, self.service)
            self.lctl.set_param(self._param("nrs_policies"), wanted_arg)
            return
        generic = self._rules().is_generic()
        if generic is not None and generic != (self.policy == "generic"):
            running = "tbf (generic)" if generic else "a typed tbf (uid/gid/jobid/nid/opcode)"
            raise Unsupported(f"{self.service}: TBF already runs as {running}, lustre.policy is "
                              f"{self.policy!r} ({wanted_arg!r}); vnode-sync will not restart TBF, "
                              f"which would drop the site's rules")

    def vnodes(self) -> list[str]:
        """VNodes with a rule of their own, and job VNodes held by their users' rules."""
        held = {j.vnode for j in self._jobs.values() if j.folded}
        return sorted({r.vnode for r in self.ledger.rules.values()} | held)

    def ensure_vnode(self, vnode: str, uid: int | None = None, job: str = "") -> None:
        """Record the user's uid (a job VNode's: its user's, and its job id); apply_limits starts the rule."""
        if vnode == DEFAULT_VNODE:
            return
        if not is_vnode_name(vnode):
            raise InvalidArgument(f"{vnode!r} is not a VNode name")
        if uid is None or uid < 0:
            raise InvalidArgument(f"VNode {vnode}: a TBF rule needs the user's uid (0 or more), got {uid}")
        if is_job_vnode(vnode):
            self._jobs[vnode] = LustreJob.of(vnode, uid, job, self.jobid_job_rule, self.policy)
        else:
            rule_name_for(self.rule_prefix, user_of_vnode(vnode) or "", uid)
        self._uid_of[vnode] = uid

    def _rule_name(self, vnode: str) -> str:
        owned = self.ledger.by_vnode(vnode)
        if owned is not None:
            return owned.name
        job = self._jobs.get(vnode)
        if job is not None:
            return job_rule_name(self.rule_prefix, vnode, job.job_id,
                                 lambda name: name in self.ledger.rules and self.ledger.rules[name].vnode != vnode)
        return rule_name_for(self.rule_prefix, user_of_vnode(vnode) or "", self._uid_of[vnode])

    def _match(self, vnode: str) -> RuleMatch:
        job = self._jobs.get(vnode)
        if job is not None:
            return job.match
        uid = self._uid_of[vnode]
        _, key = POLICIES[self.policy]
        value = self.jobid_rule.format(uid=uid) if key == "jobid" else str(uid)
        return RuleMatch(key, (value,))

    def _folded_into(self, user_vnode: str) -> list[LustreJob]:
        return [j for j in self._jobs.values() if j.folded and j.user_vnode == user_vnode]

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

    def apply_limits(self, vnode: str, limits: list[DeviceLimits], node: Shares = Shares()) -> None:
        """Make the VNode's rule carry the rate its shares convert to; restore hand edits.

        A job folded into its user's rule (uid policy) has none: its shares go to its user's rule."""
        if vnode == DEFAULT_VNODE:
            return
        if vnode not in self._uid_of:
            raise InvalidArgument(f"VNode {vnode}: ensure_vnode(vnode, uid) must come before apply_limits")
        self._wanted[vnode] = list(limits)
        job = self._jobs.get(vnode)
        if job is not None and job.folded:
            self._conversion.pop(vnode, None)
            self._stop_owned(vnode)      # its own rule from before (another policy or job id rule)
            if job.user_vnode in self._wanted:
                self._apply_rule(job.user_vnode)
            return
        self._apply_rule(vnode)

    def _apply_rule(self, vnode: str) -> None:
        # A user's rule also carries the shares of its jobs that have no rule of their own.
        limits = [*self._wanted[vnode], *(d for j in self._folded_into(vnode) for d in self._wanted.get(j.vnode, []))]
        target = combined_target(limits, self._mix.get(vnode))
        name = self._rule_name(vnode)
        match = self._match(vnode)
        if target is None:
            self._conversion.pop(vnode, None)
            self._stop_owned(vnode)
            return
        job = self._jobs.get(vnode)
        ahead_of = self._owned_name(job.user_vnode) if job is not None else None
        rules = self._rules(name, ahead_of)
        conversion = RateConversion.of(target, self.bulk_rpc_bytes(), len(rules.partitions()) or 1)
        if conversion.clamped and self._conversion.get(vnode) != conversion:
            self._note(f"{vnode}: {conversion}")
        self._conversion[vnode] = conversion
        self._converge(vnode, name, match, conversion.per_partition, rules, ahead_of)
        if ahead_of is not None:
            self._keep_ahead(vnode, name, match, conversion.per_partition, ahead_of)

    def _owned_name(self, vnode: str) -> str | None:
        owned = self.ledger.by_vnode(vnode)
        return owned.name if owned is not None else None

    def _keep_ahead(self, vnode: str, name: str, match: RuleMatch, rate: int, user_rule: str) -> None:
        """A job's rule must come before its user's, or the user's takes the job's RPCs.

        Put back by stop and start (`rank=`), not `change ... rank=`: Lustre binds each TBF class
        to a rule and matches it again only when a rule starts or its rule stops (nrs_tbf_res_get,
        th_rule_sequence); a rank change alone would leave the job's class on its user's rule."""
        misordered = self._rules(name, user_rule).misordered(name, user_rule)
        if not misordered:
            return
        where = ", ".join(f"{q} CPT {c}" for q, c in misordered)
        self._note(f"{vnode}: rule {name} came after its user's rule {user_rule} in {where}; restarting it ahead")
        self._set_rule(name, f"stop {name}")
        self._start(vnode, name, match, rate, user_rule)

    def _converge(self, vnode: str, name: str, match: RuleMatch, rate: int, rules: RuleList,
                  ahead_of: str | None = None) -> None:
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
            self._set_rule(name, f"stop {name}")
            self._start(vnode, name, match, rate, self._rank(ahead_of, rules))
            return
        if foreign:
            # TBF cannot change a rule's match in place: someone stopped ours and started theirs.
            raise RuleCollision(self.service, name, str(foreign[0]))
        if not present:
            if owned is not None:
                self._note(f"{vnode}: rule {name} was stopped outside vnode-sync; starting it again")
            self._start(vnode, name, match, rate, self._rank(ahead_of, rules))
        elif len(present) < len(views):
            missing = sorted(f"{q} CPT {c}" for (q, c), r in views.items() if r is None)
            self._note(f"{vnode}: rule {name} missing in {', '.join(missing)}; restarting it everywhere")
            self._set_rule(name, f"stop {name}")
            self._start(vnode, name, match, rate, self._rank(ahead_of, rules))
        elif any(r.rate != rate for r in present):
            found = sorted({r.rate for r in present})
            if self._rate_set.get(vnode) is not None and found != [self._rate_set[vnode]]:
                self._note(f"{vnode}: rule {name} rate changed to {found} outside vnode-sync; restoring {rate}")
            self._set_rule(name, f"change {name} rate={rate}")
            self._rate_set[vnode] = rate
            log.info("changed TBF rule %s to rate=%d per CPT on %s", name, rate, self.service)
        else:
            self._rate_set[vnode] = rate

    @staticmethod
    def _rank(ahead_of: str | None, rules: RuleList) -> str | None:
        """`rank=` for a job's rule: right before its user's where that is in every partition (else
        the top of the list, which is ahead of it too, or the user has no rule)."""
        if ahead_of is None or any(r is None for r in rules.views(ahead_of).values()):
            return None
        return ahead_of

    def _start(self, vnode: str, name: str, match: RuleMatch, rate: int, rank: str | None = None) -> None:
        # Recorded first so a crash after the start still leaves the rule ours, not a "collision".
        self.ledger.record(OwnedRule(name, vnode, self._uid_of[vnode], match))
        try:
            self._set_rule(name, f"start {name} {match} rate={rate}" + (f" rank={rank}" if rank else ""))
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
        views = self._rules(owned.name).views(owned.name)
        present = [r for r in views.values() if r is not None]
        if any(r.expression != owned.match.listed(self.policy == "generic") for r in present):
            self._note(f"{vnode}: rule {owned.name} now matches {present[0].expression}, not ours; "
                       f"leaving it and forgetting ownership")
        elif present:
            self._set_rule(owned.name, f"stop {owned.name}")
            log.info("stopped TBF rule %s on %s", owned.name, self.service)
        self.ledger.forget(owned.name)

    def commit(self, uids: dict[int, str], connections: dict[tuple[str, int], str]) -> None:
        """The pass ends (each rule change was an lctl call of its own): the next reads Lustre anew."""
        self._in_pass, self._pass_rules, self._written = False, None, set()

    def remove_vnode(self, vnode: str) -> None:
        """Stop the VNode's rule (a job's RPCs then meet its user's); a job held by its user's rule
        takes its share out of it."""
        self._stop_owned(vnode)
        job = self._jobs.pop(vnode, None)
        for table in (self._uid_of, self._wanted, self._conversion, self._rate_set, self._samples, self._rpcs,
                      self._mix):
            table.pop(vnode, None)
        if job is not None and job.folded and job.user_vnode in self._wanted:
            self._apply_rule(job.user_vnode)

    # -- usage and hits --------------------------------------------------------------------------------

    def _job_stats(self, ost: str) -> list[JobStat]:
        return JobStat.parse_all(self.lctl.get_param(f"obdfilter.{ost}.job_stats"))

    def _uid_of_job(self, job_id: str) -> int | None:
        m = self._jobid_uid.fullmatch(job_id)
        return int(m["uid"]) if m else None

    def _uid(self, vnode: str) -> int | None:
        owned = self.ledger.by_vnode(vnode)
        return self._uid_of.get(vnode, owned.uid if owned else None)

    def _lustre_id(self, vnode: str) -> str | None:
        """A job VNode's Lustre job id: this run's, else its rule's from the ledger (after a restart)."""
        if vnode in self._jobs:
            return self._jobs[vnode].lustre_id
        owned = self.ledger.by_vnode(vnode)
        return owned.match.values[0] if owned is not None and owned.match.key == "jobid" else None

    def _counters(self, vnodes: list[str]) -> dict[str, dict[DeviceNumber, IoCounters]]:
        """Cumulative bytes and RPCs of each VNode per OST, from one job_stats read per OST.

        An entry counts for the job VNode whose Lustre job id it is, else for the user whose uid
        its job id carries (jobid_var=procname_uid or jobid_name "%e.%u"/"%j.%u"): every known job
        is taken out of its user's counts, asked for or not. job_stats entries expire after
        job_cleanup_interval, so counters can go down.
        """
        jobs = {v: lid for v in {*vnodes, *self.vnodes()} if is_job_vnode(v) and (lid := self._lustre_id(v))}
        charging = JobStatCharging.of(jobs)
        vnode_of_uid = {uid: vnode for vnode in vnodes
                        if not is_job_vnode(vnode) and (uid := self._uid(vnode)) is not None}
        asked = {*vnode_of_uid.values(), *(v for v in vnodes if v in jobs)}
        counters = {vnode: {dev: IoCounters() for dev in self.targets.values()} for vnode in asked}
        for ost, dev in self.targets.items():
            for job in self._job_stats(ost):
                vnode = charging.job_vnode(job.job_id) or vnode_of_uid.get(self._uid_of_job(job.job_id))
                if vnode in asked:
                    c = counters[vnode][dev]
                    c.read_bytes += job.read_bytes
                    c.write_bytes += job.write_bytes
                    c.read_ios += job.read_rpcs
                    c.write_ios += job.write_rpcs
        return counters

    def usage(self) -> dict[str, VNodeUsage]:
        """Every VNode's usage: one job_stats read per OST and one rule-list read in all."""
        usage = {}
        counters = self._counters(self.vnodes())
        rules = self.rule_list() if counters else None
        for vnode, devices in counters.items():
            under_rule = self._under_rule(vnode, counters)
            self._note_mix(vnode, under_rule)
            state = self.limit_state(vnode, under_rule, rules)
            usage[vnode] = VNodeUsage(devices, held_at_limit=bool(state and state.held), held_source=HELD_ESTIMATED)
        return usage

    def _under_rule(self, vnode: str,
                    counters: dict[str, dict[DeviceNumber, IoCounters]]) -> dict[DeviceNumber, IoCounters]:
        """What the VNode's rule sees: its own counters, and those of the jobs its rule holds (uid policy)."""
        folded = [counters[j.vnode] for j in self._folded_into(vnode) if j.vnode in counters]
        if not folded:
            return counters[vnode]
        return {dev: IoCounters(*(sum(getattr(c[dev], f) for c in (counters[vnode], *folded))
                                  for f in ("read_bytes", "write_bytes", "read_ios", "write_ios")))
                for dev in counters[vnode]}

    def _note_mix(self, vnode: str, devices: dict[DeviceNumber, IoCounters]) -> None:
        """The user's read/write mix since the last read, for the next rule rate (combined_target)."""
        now = (sum(c.read_ios for c in devices.values()), sum(c.write_ios for c in devices.values()))
        before = self._rpcs.get(vnode)
        self._rpcs[vnode] = now
        if before is not None and now[0] >= before[0] and now[1] >= before[1]:
            mix = IoMix.of(now[0] - before[0], now[1] - before[1])
            if mix is not None:
                self._mix[vnode] = mix

    def limit_state(self, vnode: str, counters: dict[DeviceNumber, IoCounters] | None = None,
                    rules: RuleList | None = None) -> LimitState | None:
        """Is the user held at its limit? None until two samples exist or without an owned rule.

        `counters`, `rules`: this VNode's counters and the rule list when the caller has just read
        them (saves the lctl calls)."""
        owned = self.ledger.by_vnode(vnode)
        conversion = self._conversion.get(vnode)
        if owned is None or conversion is None:
            return None
        if counters is None:
            everyone = self._counters([vnode, *(j.vnode for j in self._folded_into(vnode))])
            counters = self._under_rule(vnode, everyone) if vnode in everyone else {}
        rpcs = sum(c.read_ios + c.write_ios for c in counters.values())
        now = self.clock()
        previous = self._samples.get(vnode)
        self._samples[vnode] = _Sample(now, rpcs)
        if previous is None or now <= previous.at or rpcs < previous.rpcs:
            return None
        measured = (rpcs - previous.rpcs) / (now - previous.at)
        views = (rules or self.rule_list()).views(owned.name)
        active = sum(1 for (queue, _), r in views.items() if queue == "regular" and r and r.ref > 0) or 1
        rate = conversion.per_partition
        return LimitState(vnode, owned.name, rate, active, measured,
                          held=at_limit(measured, rate * active))

    def teardown(self) -> None:
        """Stop the rules vnode-sync started, and only those; TBF itself stays as the site had it."""
        for rule in list(self.ledger.rules.values()):
            self._stop_owned(rule.vnode)
