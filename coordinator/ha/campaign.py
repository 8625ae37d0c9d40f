"""A coordinator among several on one ZooKeeper ensemble (docs/ha.md): it listens as a standby
(refusing every call, naming the leader), campaigns, and once elected opens its state fenced on
its election znode, takes a new generation (so no generation it publishes was published by an
earlier leader), and serves. Losing the ZooKeeper session ends it (leadership.LeaderGuard)."""

import logging
import threading

from vnode_sync.coordinator.config import WORK_CONSERVING, CoordinatorConfig
from vnode_sync.coordinator.ha.leadership import Election, LeaderGate, LeaderGuard, connect
from vnode_sync.coordinator.api.server import CoordinatorServer
from vnode_sync.coordinator.state.zookeeper_store import ZooKeeperStore

log = logging.getLogger(__name__)


class HighAvailability:
    def __init__(self, config: CoordinatorConfig):
        self.settings = config.zookeeper
        self.config = config
        self.election: Election | None = None
        self.gate = LeaderGate(lambda: self.election.leader() if self.election else "")
        self.client = None
        self.guard: LeaderGuard | None = None

    def standby(self, server: CoordinatorServer) -> None:
        """Connect, make the store if the ensemble has none (seeded from the YAML), stand for
        election and answer calls as a standby."""
        self.client = connect(self.settings)
        first = ZooKeeperStore(self.client, self.settings.root, create=True, seed_users=self.config.users)
        if first.created:
            log.info("made the state store in ZooKeeper under %s", self.settings.root)
        self.election = Election(self.client, self.settings, on_failure=server.fail)
        server.listen()

    def lead(self, server: CoordinatorServer, stop: threading.Event) -> ZooKeeperStore | None:
        """Block until elected (None if `stop` came first); then the fenced store, at a new generation."""
        if not self.election.campaign(stop):
            return None
        store = ZooKeeperStore(self.client, self.settings.root, create=False, fence=self.election.fence)
        self.guard = LeaderGuard(self.client, self.settings.session_timeout_seconds,
                                 pause=lambda: (self.gate.close(), server.pause_streams()),
                                 resume=lambda: (self.gate.open(), server.resume_streams()),
                                 on_lost=server.fail)
        generation = store.touch()
        log.info("elected leader (%s) at generation %d", self.settings.advertise, generation)
        return store

    def serving(self, server: CoordinatorServer) -> None:
        """The services are in place: calls may pass. Under work-conserving sharing the streams
        first wait `learn_seconds`, while the agents' usage reports come in."""
        if self.config.policy.sharing == WORK_CONSERVING and self.settings.learn_seconds:
            server.learn_for(self.settings.learn_seconds)
        self.gate.open()

    def close(self) -> None:
        self.gate.close()
        if self.election is not None:
            self.election.stop()
        if self.client is not None:
            self.client.stop()
            self.client.close()
