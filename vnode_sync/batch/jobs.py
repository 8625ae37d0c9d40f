"""What a prologue or epilogue tells us about a job, read from Slurm's environment or PBS's argv.

Slurm (slurm.conf Prolog/Epilog, run by slurmd as root): SLURM_JOB_ID, SLURM_JOB_USER,
SLURM_JOB_UID, SLURM_JOB_ACCOUNT, SLURM_JOB_PARTITION, SLURM_JOB_COMMENT and
SLURMD_NODENAME are in the environment (checked with Debian's slurmd 22.05).

TORQUE pbs_mom runs mom_priv/prologue{,.parallel} with an empty environment and argv
  1 job id, 2 user, 3 group, 4 job name, 5 resource limits, 6 queue, 7 account
and mom_priv/epilogue{,.parallel} with
  1 job id, 2 user, 3 group, 4 job name, 5 session id, 6 resource limits,
  7 resources used, 8 queue, 9 account, and in later versions 10 exit status.
PBS Professional passes only the first three to its prologue, so later fields are optional.
"""

import enum
import logging
import pwd
import re
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from vnode_sync import validation
from vnode_sync.errors import InvalidArgument

log = logging.getLogger(__name__)

# The job attribute a user sets to ask for a priority: `sbatch --comment vnode_priority=20`,
# `qsub -l other=vnode_priority=20` (TORQUE) or a custom resource `-l vnode_priority=20` (PBS Pro).
PRIORITY_KEY = "vnode_priority"
_PRIORITY_REQUEST = re.compile(rf"(?:^|[\s,;:=+]){PRIORITY_KEY}=([^\s,;:+]*)")
# Likewise a floor and a ceiling for the job's user under the work-conserving policy:
# `vnode_reservation=15MB/s`, `vnode_limit=100MB/s`.
RESERVATION_KEY = "vnode_reservation"
LIMIT_KEY = "vnode_limit"


class JobPhase(enum.Enum):
    START = "start"
    END = "end"


@dataclass(frozen=True)
class JobEvent:
    """One job starting or ending on one compute node."""

    phase: JobPhase
    job_id: str
    user: str
    uid: int
    node: str
    account: str = ""
    queue: str = ""
    requested_priority: int = 0   # 0: the job asked for none; else already within 1..100
    requested_reservation: int = 0  # bytes/s; 0: none
    requested_limit: int = 0        # bytes/s; 0: none
    sister: bool = False          # ran on a sister node (.parallel scripts)

    def describe(self) -> str:
        where = f"{self.node} (sister)" if self.sister else self.node
        return f"job {self.job_id} of user {self.user} on {where}"


def requested_priority(text: str, job_id: str = "?") -> int:
    """The priority a job attribute asks for; 0 if none or unreadable. Never raises: a typo must not fail a job."""
    matches = _PRIORITY_REQUEST.findall(text or "")
    if not matches:
        return 0
    raw = matches[-1]
    try:
        value = int(raw)
    except ValueError:
        log.warning("job %s: ignoring %s=%r: not an integer (allowed %d..%d)", job_id, PRIORITY_KEY, raw,
                    validation.PRIORITY_MIN, validation.PRIORITY_MAX)
        return 0
    clamped = min(max(value, validation.PRIORITY_MIN), validation.PRIORITY_MAX)
    if clamped != value:
        log.warning("job %s: %s=%d clamped to %d (allowed %d..%d)", job_id, PRIORITY_KEY, value, clamped,
                    validation.PRIORITY_MIN, validation.PRIORITY_MAX)
    return clamped


def _requested_rate(key: str, text: str, job_id: str) -> int:
    """The bytes/s a job attribute gives `key`; 0 if none or unreadable (logged, never raised)."""
    matches = re.findall(rf"(?:^|[\s,;:=+]){key}=([^\s,;:+]*)", text or "")
    if not matches:
        return 0
    try:
        return validation.rate(matches[-1], key)
    except InvalidArgument as e:
        log.warning("job %s: ignoring it: %s", job_id, e)
        return 0


def requested_reservation(text: str, job_id: str = "?") -> int:
    """The floor (bytes/s) a job attribute asks for; 0 if none or unreadable."""
    return _requested_rate(RESERVATION_KEY, text, job_id)


def requested_limit(text: str, job_id: str = "?") -> int:
    """The ceiling (bytes/s) a job attribute asks for; 0 if none or unreadable."""
    return _requested_rate(LIMIT_KEY, text, job_id)


def local_node_name() -> str:
    return socket.gethostname().split(".")[0]


def _uid_of(user: str) -> int:
    try:
        uid = pwd.getpwnam(user).pw_uid
    except KeyError as e:
        raise InvalidArgument(f"user {user!r} is not known on this node (getpwnam failed)") from e
    return validation.uid(uid)


def _required(env: Mapping[str, str], key: str) -> str:
    value = env.get(key, "")
    if not value:
        raise InvalidArgument(f"{key} is not set: is this running as a Slurm Prolog/Epilog?")
    return value


def from_slurm_env(phase: JobPhase, env: Mapping[str, str], node: str | None = None) -> JobEvent:
    job_id = _required(env, "SLURM_JOB_ID")
    user = validation.user_name(_required(env, "SLURM_JOB_USER"))
    raw_uid = env.get("SLURM_JOB_UID", "")
    try:
        uid = validation.uid(int(raw_uid)) if raw_uid else _uid_of(user)
    except ValueError as e:
        raise InvalidArgument(f"SLURM_JOB_UID {raw_uid!r} is not an integer uid") from e
    return JobEvent(
        phase=phase, job_id=job_id, user=user, uid=uid,
        node=node or env.get("SLURMD_NODENAME") or local_node_name(),
        account=env.get("SLURM_JOB_ACCOUNT", ""), queue=env.get("SLURM_JOB_PARTITION", ""),
        requested_priority=requested_priority(env.get("SLURM_JOB_COMMENT", ""), job_id) if phase is JobPhase.START
        else 0,
        requested_reservation=requested_reservation(env.get("SLURM_JOB_COMMENT", ""), job_id)
        if phase is JobPhase.START else 0,
        requested_limit=requested_limit(env.get("SLURM_JOB_COMMENT", ""), job_id) if phase is JobPhase.START else 0)


def from_pbs_argv(phase: JobPhase, argv: Sequence[str], sister: bool = False, node: str | None = None) -> JobEvent:
    """`argv` without the program name, exactly as pbs_mom passes it."""
    if len(argv) < 2 or not argv[0] or not argv[1]:
        raise InvalidArgument(f"expected at least job id and user as arguments, got {list(argv)!r}: "
                              "is this running as a PBS prologue/epilogue?")
    job_id, user = argv[0], validation.user_name(argv[1])

    def field(index: int) -> str:
        return argv[index] if len(argv) > index else ""

    if phase is JobPhase.START:
        limits, queue, account = field(4), field(5), field(6)
    else:
        limits, queue, account = field(5), field(7), field(8)
    return JobEvent(
        phase=phase, job_id=job_id, user=user, uid=_uid_of(user), node=node or local_node_name(),
        account=account, queue=queue,
        requested_priority=requested_priority(limits, job_id) if phase is JobPhase.START else 0,
        requested_reservation=requested_reservation(limits, job_id) if phase is JobPhase.START else 0,
        requested_limit=requested_limit(limits, job_id) if phase is JobPhase.START else 0,
        sister=sister)
