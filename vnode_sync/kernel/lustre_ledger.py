"""Which TBF rules this agent started, kept in a file so a restarted agent tells its rules from
the site's."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from vnode_sync.durable import write_atomically
from vnode_sync.kernel.lustre_rules import RuleMatch


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
