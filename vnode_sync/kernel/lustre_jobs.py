"""Jobs as VNodes on a Lustre OSS: a job's TBF rule matches its Lustre job id, and job_stats
entries are charged to the job before its user.

A job VNode (`vnode.<user>.<job>`, validation.job_vnode_name) is its user's uid and its batch job
id. Lustre sees the job as the job id its clients put in each RPC (jobid_var/jobid_name, e.g.
"%j.%u": "1234.500"); `lustre.jobid_job_rule` says how that id is made ("{job}.{uid}"). With the
`jobid` and `generic` TBF policies the job gets a rule of its own on that id, ahead of its user's
rule (TBF takes the first rule that matches, nrs_tbf.c nrs_tbf_rule_match). The `uid` policy
cannot tell a job's RPCs from its user's: the job is *folded* into its user's rule, which then
carries the user's share and its folded jobs' shares together (docs/lustre.md, "Jobs").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from vnode_sync import validation
from vnode_sync.errors import InvalidArgument
from vnode_sync.kernel.backend import USER_VNODE_PREFIX, user_of_vnode, vnode_name
from vnode_sync.kernel.lustre_rules import JOBID_MAX, RuleMatch, jobid_matches

FOLDED_BY_POLICY = "the uid policy"
FOLDED_BY_LENGTH = "a Lustre job id too long"


def is_job_vnode(vnode: str) -> bool:
    return vnode.startswith(USER_VNODE_PREFIX) and validation.JOB_VNODE_SEPARATOR in vnode[len(USER_VNODE_PREFIX):]


@dataclass(frozen=True)
class LustreJob:
    """One job VNode as the TBF backend sees it."""

    vnode: str            # vnode.alice.1234
    user_vnode: str       # vnode.alice
    job_id: str           # as the batch system names it: 1234, 123[4].server
    lustre_id: str        # as Lustre's clients send it: 1234.500
    folded: str | None    # why it shares its user's rule (FOLDED_BY_*); None: it has its own

    @classmethod
    def of(cls, vnode: str, uid: int, job: str, template: str, policy: str) -> "LustreJob":
        """Checked before anything reaches lctl: the VNode's name, the job id, and that they agree."""
        name = user_of_vnode(vnode) or ""
        user = validation.user_of_job_vnode(name)
        if not job:
            raise InvalidArgument(f"VNode {vnode} is a job's: its TBF rule needs the job id, got none")
        if validation.job_vnode_name(user, validation.job_id(job)) != name:
            raise InvalidArgument(f"job {job!r} of user {user} is not VNode {vnode}'s")
        lustre_id = template.format(job=job, uid=uid)
        folded = (FOLDED_BY_POLICY if policy == "uid"
                  else FOLDED_BY_LENGTH if len(lustre_id) > JOBID_MAX else None)
        return cls(vnode, vnode_name(user), job, lustre_id, folded)

    @property
    def match(self) -> RuleMatch:
        return RuleMatch("jobid", (self.lustre_id,))


def folded_lines(jobs: Iterable[LustreJob], template: str) -> list[str]:
    """One line per reason some jobs share their users' rules (the backend's `degraded`)."""
    by_reason: dict[str, list[str]] = {}
    for job in jobs:
        if job.folded:
            by_reason.setdefault(job.folded, []).append(job.vnode)
    lines = []
    for reason, vnodes in sorted(by_reason.items()):
        vnodes.sort()
        named = ", ".join(vnodes[:3]) + (f" and {len(vnodes) - 3} more" if len(vnodes) > 3 else "")
        if reason == FOLDED_BY_POLICY:
            lines.append(f"lustre.policy uid cannot tell a job's RPCs from its user's: {len(vnodes)} job VNode(s) "
                         f"({named}) are held by their users' rules, each carrying its user's and its jobs' shares "
                         f"together; policy jobid or generic gives each job a rule of its own")
        else:
            lines.append(f"{len(vnodes)} job VNode(s) ({named}) have a Lustre job id (lustre.jobid_job_rule "
                         f"{template!r}) over {JOBID_MAX} characters, which no RPC carries: they are held by their "
                         f"users' rules")
    return lines


@dataclass(frozen=True)
class JobStatCharging:
    """Which VNode a job_stats entry counts for: a job VNode whose Lustre job id matches it first
    (exact, or `*` as TBF reads it), else the user whose uid the job id carries; never both."""

    exact: dict[str, str]                  # Lustre job id -> job VNode
    patterns: tuple[tuple[str, str], ...]  # (Lustre job id with '*', job VNode)

    @classmethod
    def of(cls, jobs: dict[str, str]) -> "JobStatCharging":
        """`jobs`: job VNode -> its Lustre job id."""
        return cls({lid: v for v, lid in jobs.items() if "*" not in lid},
                   tuple(sorted((lid, v) for v, lid in jobs.items() if "*" in lid)))

    def job_vnode(self, job_id: str) -> str | None:
        if job_id in self.exact:
            return self.exact[job_id]
        return next((v for pattern, v in self.patterns if jobid_matches(pattern, job_id)), None)
