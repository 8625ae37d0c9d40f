"""The audited commands: validate, change the durable store, publish the new generation, audit.

Each runs on the store thread (in arrival order with every other store call). A refused command
raises a VNodeSyncError having changed nothing; a done one writes one audit line (who, what, old
and new value, generation).
"""

import logging
import time

from vnode_sync import validation
from vnode_sync.coordinator.config import WORK_CONSERVING, CoordinatorConfig
from vnode_sync.coordinator.policy.admission import check_admission
from vnode_sync.coordinator.control.publishing import Publishing
from vnode_sync.coordinator.state.store import Store, UserRecord
from vnode_sync.errors import InvalidArgument, NotFound, Unsupported
from vnode_sync.security.audit import AUDIT_LOGGER

log = logging.getLogger(__name__)
audit = logging.getLogger(AUDIT_LOGGER)


class Commands:
    def __init__(self, config: CoordinatorConfig, store: Store, publishing: Publishing):
        self.config = config
        self.store = store
        self._published = publishing.published

    # ---- users -------------------------------------------------------------

    def add_user(self, name: str, uid: int, priority: int, active: bool, actor: str) -> UserRecord:
        validation.user_name(name)
        validation.uid(uid)
        validation.priority(priority)
        self._uid_free_for(name, uid)
        self._published(self.store.add_user(name, uid, priority, active))
        audit.info("actor=%s action=add-user user=%s uid=%d priority=%d active=%s",
                   actor, name, uid, priority, active)
        return self.store.user(name)

    def set_priority(self, name: str, priority: int, actor: str) -> UserRecord:
        validation.user_name(name)
        validation.priority(priority)
        generation, old = self.store.set_priority(name, priority)
        self._published(generation)
        audit.info("actor=%s action=set-priority user=%s old=%d new=%d generation=%d",
                   actor, name, old, priority, generation)
        return self.store.user(name)

    def set_active(self, name: str, active: bool, actor: str) -> UserRecord:
        validation.user_name(name)
        generation, old = self.store.set_active(name, active)
        self._published(generation)
        audit.info("actor=%s action=%s user=%s old=%s new=%s generation=%d", actor,
                   "activate" if active else "deactivate", name, old, active, generation)
        return self.store.user(name)

    def set_reservation(self, name: str, bps: int, actor: str) -> UserRecord:
        """A floor (bytes/s, on each node the user uses) for the work-conserving policy; admitted only
        if every user's reservations still fit each device's capacity."""
        validation.user_name(name)
        validation.bandwidth(bps, "reservation")
        if name not in {u.name for u in self.store.users()}:
            raise NotFound(f"unknown user {name!r}")
        self._bound_applies("reservation", bps)
        self._admit(name, bps)
        generation, old = self.store.set_reservation(name, bps)
        self._published(generation)
        audit.info("actor=%s action=set-reservation user=%s old=%d new=%d generation=%d",
                   actor, name, old, bps, generation)
        return self.store.user(name)

    def _bound_applies(self, what: str, bps: int) -> None:
        """Refuse a floor or ceiling the policy in force would store and never apply (static shares split
        each device by priority alone); clearing one (0) stays allowed, e.g. after leaving work-conserving."""
        sharing = self.config.policy.sharing
        if bps and sharing != WORK_CONSERVING:
            raise Unsupported(f"a {what} applies only with policy.sharing work-conserving; this coordinator's "
                              f"is {sharing}, which would ignore it (docs/fair-shares.md)")

    def _admit(self, name: str, bps: int) -> None:
        """Refuse a floor for `name` that would make the reservations overbook a device."""
        reservations = {u.name: u.effective_reservation for u in self.store.users() if u.name != name}
        reservations[name] = bps
        for direction in ("read_bps", "write_bps"):
            check_admission({f"{n.node_id}:{d.name}": getattr(d, direction)
                             for n in self.config.storage_nodes for d in n.devices}, reservations)

    def set_limit(self, name: str, bps: int, actor: str) -> UserRecord:
        validation.user_name(name)
        validation.bandwidth(bps, "limit")
        self.store.user(name)   # an unknown user is NOT_FOUND, whatever the policy
        self._bound_applies("limit", bps)
        generation, old = self.store.set_limit(name, bps)
        self._published(generation)
        audit.info("actor=%s action=set-limit user=%s old=%d new=%d generation=%d", actor, name, old, bps, generation)
        return self.store.user(name)

    def _uid_free_for(self, name: str, uid: int) -> None:
        """A uid names one user: a second user with it would be charged to the first's VNode."""
        holder = self.store.holder_of_uid(uid, name)
        if holder is not None:
            raise InvalidArgument(f"uid {uid} is already held by user {holder!r}; "
                                  f"one uid per user (remove {holder!r} first)")

    def remove_user(self, name: str, actor: str) -> None:
        validation.user_name(name)
        old = self.store.user(name)
        generation = self.store.remove_user(name)
        self._published(generation)
        audit.info("actor=%s action=remove-user user=%s old_priority=%d generation=%d",
                   actor, name, old.priority, generation)

    # ---- jobs --------------------------------------------------------------

    def job_priority(self, requested: int, account: str, queue: str) -> int | None:
        """A job's priority by policy; None means the user's own priority applies."""
        policy = self.config.policy
        if requested:
            clamped = min(max(requested, policy.job_priority_min), policy.job_priority_max)
            if clamped != requested:
                log.warning("requested job priority %d clamped to %d (allowed %d..%d)", requested, clamped,
                            policy.job_priority_min, policy.job_priority_max)
            return clamped
        if queue in policy.queue_priorities:
            return policy.queue_priorities[queue]
        if account in policy.account_priorities:
            return policy.account_priorities[account]
        return None

    def start_job(self, job_id: str, user: str, uid: int, node: str, account: str, queue: str,
                  requested_priority: int, actor: str, reservation_bps: int = 0,
                  limit_bps: int = 0) -> tuple[UserRecord, int]:
        validation.label(job_id, "job id")
        validation.user_name(user)
        validation.uid(uid)
        validation.node_id(node)
        validation.label(account, "account", required=False)
        validation.label(queue, "queue", required=False)
        if requested_priority:   # 0: the job asked for nothing
            validation.priority(requested_priority)
        validation.bandwidth(reservation_bps, "job reservation")
        validation.bandwidth(limit_bps, "job limit")
        if reservation_bps:
            try:
                self._admit(user, reservation_bps)
            except InvalidArgument as e:   # a job is never refused for its floor: it runs without it
                log.warning("job %s of user %s: its reservation is not admitted (%s); the job runs without it",
                            job_id, user, e)
                reservation_bps = 0
        self._uid_free_for(user, uid)
        priority = self.job_priority(requested_priority, account, queue)
        generation = self.store.start_job(job_id, node, user, uid, priority, self.config.policy.default_priority,
                                          reservation_bps, limit_bps)
        self._published(generation)
        record = self.store.user(user)
        audit.info("actor=%s action=start-job job=%s node=%s user=%s job_priority=%s effective=%d "
                   "job_reservation=%d job_limit=%d", actor, job_id, node, user, priority, record.effective_priority,
                   reservation_bps, limit_bps)
        return record, priority or record.priority

    def end_job(self, job_id: str, node: str, actor: str) -> UserRecord | None:
        validation.label(job_id, "job id")
        if node:   # "": the job on every node
            validation.node_id(node)
        generation, user = self.store.end_job(job_id, node)
        self._published(generation)
        audit.info("actor=%s action=end-job job=%s node=%s user=%s", actor, job_id, node, user)
        return self.store.user(user) if user else None

    def reconcile_jobs(self, node: str, running: set[str], actor: str) -> list[str]:
        if not node:
            raise InvalidArgument("ReconcileJobs needs a source (the node or batch system whose jobs these are); "
                                  "an empty source would drop every node's jobs")
        validation.node_id(node)
        for job_id in running:
            validation.label(job_id, "job id")
        dropped = self.store.confirm_running_jobs(node, running)
        if dropped:
            self._published(self.store.generation())
            audit.info("actor=%s action=reconcile-jobs node=%s dropped=%s", actor, node, ",".join(dropped))
        return dropped

    def expire_jobs(self) -> None:
        expired = self.store.expire_jobs(time.time() - self.config.policy.job_expiry_seconds)
        if expired:
            self._published(self.store.generation())
            audit.info("actor=coordinator action=expire-jobs jobs=%s",
                       ",".join(f"{j}@{n}" for j, n in expired))
