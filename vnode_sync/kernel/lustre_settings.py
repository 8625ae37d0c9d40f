"""The agent's `lustre:` section, for the lustre-tbf backend (docs/lustre.md), read by the one loader."""

import re
from typing import Annotated, Literal

import annotated_types as at
from pydantic import Field, field_validator

from vnode_sync.config_loading import Allowed, Settings, Unit

DEFAULT_SERVICE = "ost.OSS.ost_io"
RULE_PREFIX_ALLOWED = "1-8 characters from A-Z, a-z, 0-9, '_' (it leaves room in a 15-character TBF rule name)"
OST_NAME_ALLOWED = "an OST name like lustre-OST0000"


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

