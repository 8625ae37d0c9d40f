"""The agent's `lustre:` section, for the lustre-tbf backend (docs/lustre.md), read by the one loader."""

import re
import string
from typing import Annotated, Literal

import annotated_types as at
from pydantic import Field, field_validator

from vnode_sync.config_loading import Allowed, Settings, Unit

DEFAULT_SERVICE = "ost.OSS.ost_io"
RULE_PREFIX_ALLOWED = "1-8 characters from A-Z, a-z, 0-9, '_' (it leaves room in a 15-character TBF rule name)"
OST_NAME_ALLOWED = "an OST name like lustre-OST0000"
JOB_RULE_ALLOWED = ("text containing {job} and optionally {uid}, otherwise A-Z, a-z, 0-9 and . _ - : @ *, "
                    "e.g. '{job}.{uid}'")
_JOBID_TEXT = re.compile(r"[A-Za-z0-9._:@*-]*")   # nothing TBF's jobid list or expression parser splits on


def _job_id_template(value: str, fields: set[str], required: str) -> str:
    """A job id with {placeholders} as lctl will see it: only `fields`, `required` among them, and
    literal text TBF reads as part of one job id (no space, brace, '&', ',' or '=')."""
    try:
        parts = list(string.Formatter().parse(value))
    except ValueError as e:
        raise ValueError(f"not a template: {e}") from e
    used = {name for _, name, _, _ in parts if name is not None}
    if any(name not in fields or spec or conversion for _, name, spec, conversion in parts if name is not None):
        raise ValueError(f"placeholders other than {', '.join('{' + f + '}' for f in sorted(fields))}")
    if required not in used:
        raise ValueError(f"no {{{required}}}")
    if not all(_JOBID_TEXT.fullmatch(text) for text, _, _, _ in parts):
        raise ValueError("characters TBF would split a job id on")
    return value


class LustreSettings(Settings):
    """How the agent drives NRS TBF on this OSS."""

    experimental: bool = False
    """true: run the lustre-tbf backend although it has not yet run on a real Lustre OSS (it is
    built from Lustre's source and manual and tested against a stand-in `lctl`; docs/lustre.md).
    Required with backend lustre-tbf until it has."""
    lctl: Annotated[str, at.MinLen(1)] = "lctl"
    """Path of the lctl binary (tests: the stand-in); found on $PATH by default."""
    service: Annotated[str, at.MinLen(1)] = DEFAULT_SERVICE
    """The NRS service whose requests are scheduled: the OSS's bulk I/O."""
    policy: Literal["uid", "jobid", "generic"] = "uid"
    """uid (`tbf uid`), jobid (`tbf jobid`), generic (`tbf`, uid={N} rules)."""
    targets: dict[Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]+-OST[0-9a-fA-F]{4}$"), Allowed(OST_NAME_ALLOWED)],
                  Annotated[str, Field(pattern=r"^/"), Allowed("an absolute block device path")]] \
        = Field(default_factory=dict)
    """OST name -> its block device, so usage is reported per device."""
    rpc_bytes: Annotated[int, at.Gt(0), at.Le(1 << 30), Unit("bytes")] | None = None
    """Bulk RPC size; unset: the OSTs' brw_size, else 4 MiB (Lustre's default since 2.9)."""
    rule_prefix: Annotated[str, Field(pattern=r"^[A-Za-z0-9_]{1,8}$"), Allowed(RULE_PREFIX_ALLOWED)] = "vnode_"
    """Rule names vnode-sync owns start with this; other rules are the site's and left alone."""
    jobid_rule: Annotated[str, Allowed("text containing {uid}, e.g. '*.{uid}'")] = "*.{uid}"
    """jobid policy: the job ids of a uid (jobid_name "%e.%u")."""
    jobid_job_rule: Annotated[str, Allowed(JOB_RULE_ALLOWED)] = "{job}.{uid}"
    """A job's Lustre job id, from its batch job id and its user's uid, as the clients' jobid_name makes it
    ("%j.%u" with jobid_var=SLURM_JOB_ID or PBS_JOBID): a job VNode's rule matches it (jobid and generic
    policies) and its job_stats entries are the job's usage. Over 31 characters once filled in, the job
    shares its user's rule."""
    jobid_uid: Annotated[str, Allowed("a regular expression with a (?P<uid>...) group")] = r".*\.(?P<uid>\d+)"
    """job_stats: where the uid sits in a job id."""
    ledger: str | None = None
    """File recording which rules this agent started; unset: /var/lib/vnode-sync/<subtree>.lustre-tbf-rules.json,
    "": in memory only (a restart then cannot tell its own rules from the site's)."""

    @field_validator("jobid_rule")
    @classmethod
    def _names_the_uid(cls, value: str) -> str:
        if "{uid}" not in value:
            raise ValueError("no {uid}")
        return value

    @field_validator("jobid_job_rule")
    @classmethod
    def _names_the_job(cls, value: str) -> str:
        return _job_id_template(value, {"job", "uid"}, "job")

    @field_validator("jobid_uid")
    @classmethod
    def _finds_the_uid(cls, value: str) -> str:
        try:
            pattern = re.compile(value)
        except re.error as e:
            raise ValueError(f"not a regular expression: {e}") from e
        if "uid" not in pattern.groupindex:
            raise ValueError("no (?P<uid>...) group")
        return value

