"""What `lctl` shows of NRS TBF and job_stats, as value types that parse and print themselves,
and the names vnode-sync gives its rules.

From Lustre's source (lustre/ptlrpc/nrs_tbf.c, lprocfs_jobstats_seq_show) and manual; the
stand-in tests/lustre_standin/lctl prints the same layouts. Not checked on a real OSS.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass

import yaml

from vnode_sync.errors import InvalidArgument

RULE_NAME_MAX = 15            # MAX_TBF_NAME (16) less the NUL, nrs_tbf.c check_rule_name
JOBID_MAX = 31                # LUSTRE_JOBID_SIZE (32) less the NUL: no RPC carries a longer job id
_RULE_NAME = re.compile(r"[A-Za-z0-9_]+")


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

    def misordered(self, first: str, then: str) -> list[tuple[str, int]]:
        """The (queue, CPT)s listing both rules with `then` ahead of `first` (TBF matches in list order)."""
        out = []
        for queue, cpts in self.queues.items():
            for cpt, rules in cpts.items():
                names = [r.name for r in rules]
                if first in names and then in names and names.index(then) < names.index(first):
                    out.append((queue, cpt))
        return sorted(out)

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
        # Every scalar as text: a job id such as "1234.500" ("%j.%u") is a float to YAML's resolver.
        doc = yaml.load(text, Loader=yaml.BaseLoader) or {}
        stats = []
        for job in doc.get("job_stats") or []:
            # "read"/"write" in Lustre before 2.7, "read_bytes"/"write_bytes" since
            read = job.get("read_bytes") or job.get("read") or {}
            write = job.get("write_bytes") or job.get("write") or {}
            stats.append(cls(str(job["job_id"]), int(read.get("sum", 0)), int(write.get("sum", 0)),
                             int(read.get("samples", 0)), int(write.get("samples", 0))))
        return stats


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


def job_rule_name(prefix: str, vnode: str, job_id: str, taken: Callable[[str], bool]) -> str:
    """`<prefix>J<job id>` for a Slurm id that fits, else `<prefix>H` and a digest of the VNode name.

    User rule names follow the prefix with a lower-case user name or a uid, never an upper-case
    letter, so neither job form can meet a user's. `taken(name)`: the name is another VNode's
    (the ledger's); the same Slurm id under two users (two clusters on one file system) then
    takes the digest form.
    """
    readable = f"{prefix}J{job_id}"
    if re.fullmatch(r"[0-9_]+", job_id) and len(readable) <= RULE_NAME_MAX and not taken(readable):
        return readable
    digest = base64.b32encode(hashlib.sha256(vnode.encode()).digest()).decode()
    hashed = f"{prefix}H{digest[:RULE_NAME_MAX - len(prefix) - 1]}"
    if taken(hashed):
        raise InvalidArgument(f"TBF rule name {hashed!r} for {vnode} is another VNode's; "
                              f"use another lustre.rule_prefix")
    return hashed


def jobid_matches(pattern: str, job_id: str) -> bool:
    """Whether a TBF jobid rule's value matches a job id: `*` is the one wildcard (nrs_tbf.c
    cfs_match_wildcard), and without one the match is exact (NRS_TBF_MATCH_FULL)."""
    if "*" not in pattern:
        return pattern == job_id
    return re.fullmatch(".*".join(re.escape(part) for part in pattern.split("*")), job_id, re.DOTALL) is not None
