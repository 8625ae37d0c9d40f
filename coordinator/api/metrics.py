"""The coordinator's Prometheus metrics (docs/metrics.md).

State (generation, agents, users) is read at scrape time by a custom collector from what the
coordinator already holds in memory, so nothing on the RPC path updates a gauge. RPC latency
and errors are counted by a gRPC server interceptor, one place for every method.

Label values are bounded by the site's configuration: `node` by the configured storage nodes,
`user` by the users in the store, `group` by the groups in the store (the tree of weights: one
series per group, its subtree's users summed, never per group and node), `service`/`method`/`code`
by the wire protocol. Per-user series
are one per user (or per user and direction) across the cluster, never per user and node: each
user's rate is kept summed by the usage ledger as reports are booked, its share from the weight
control's last step.
"""

import asyncio
import inspect
import time
from collections.abc import Iterator

import grpc
from grpc import aio
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from vnode_sync.coordinator.cluster import Cluster
from vnode_sync.coordinator.state.groups import group_members, roll_up
from vnode_sync.coordinator.control.job_vnodes import by_user

# gRPC round trips here run from ~0.2 ms (a small unary call) to seconds (Status of 10,000 x 100).
RPC_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class CoordinatorCollector(Collector):
    def __init__(self, cluster: Cluster):
        self.cluster = cluster

    def collect(self) -> Iterator[Metric]:
        cluster = self.cluster
        generation = cluster.generation()
        yield GaugeMetricFamily("vnode_sync_coordinator_generation",
                                "The desired state's generation (bumped by every durable change)", generation)
        connected = GaugeMetricFamily("vnode_sync_coordinator_node_connected",
                                      "1 while the storage node's agent holds a desired-state stream", labels=["node"])
        applied = GaugeMetricFamily("vnode_sync_coordinator_node_applied_generation",
                                    "The generation the node's agent last reported applied", labels=["node"])
        lag = GaugeMetricFamily("vnode_sync_coordinator_node_generation_lag",
                                "Generations the node's agent is behind the coordinator, as of its last report",
                                labels=["node"])
        seen = GaugeMetricFamily("vnode_sync_coordinator_node_last_seen_timestamp_seconds",
                                 "When the node's agent last registered, opened its stream or reported (unix "
                                 "seconds; 0 = never since the coordinator started)", labels=["node"])
        errors = GaugeMetricFamily("vnode_sync_coordinator_node_reconcile_errors",
                                   "Errors in the node's last reported reconcile pass", labels=["node"])
        updates = CounterMetricFamily("vnode_sync_coordinator_node_allocation_updates",
                                      "Work-conserving weights or caps pushed to the node since the coordinator started",
                                      labels=["node"])
        work_conserving = cluster.weights is not None
        pushed = cluster.allocation_updates()
        streams = 0
        for node in cluster.config.storage_nodes:
            runtime = cluster.runtime.node_runtime(node.node_id)
            streams += runtime.streams > 0
            labels = [node.node_id]
            connected.add_metric(labels, 1 if runtime.streams > 0 else 0)
            applied.add_metric(labels, runtime.applied_generation)
            lag.add_metric(labels, max(0, generation - runtime.applied_generation) if runtime.applied_generation else 0)
            seen.add_metric(labels, runtime.last_seen)
            errors.add_metric(labels, len(runtime.errors))
            if work_conserving:
                updates.add_metric(labels, pushed.get(node.node_id, 0))
        yield from (connected, applied, lag, seen, errors)
        if work_conserving:
            yield updates
        yield GaugeMetricFamily("vnode_sync_coordinator_agents_connected",
                                "Storage nodes whose agent holds a desired-state stream", streams)
        yield GaugeMetricFamily("vnode_sync_coordinator_agents_configured", "Storage nodes in the configuration",
                                len(cluster.config.storage_nodes))
        yield from self._users()
        yield from self._groups()

    def _users(self) -> Iterator[Metric]:
        users = self.cluster.publishing.snapshot().users
        held = self.cluster.ledger.held_now()
        active = GaugeMetricFamily("vnode_sync_coordinator_user_active", "1 while the user has a share (active)",
                                   labels=["user"])
        priority = GaugeMetricFamily("vnode_sync_coordinator_user_priority",
                                     "The user's effective priority (1..100; the weight of the work-conserving policy)",
                                     labels=["user"])
        nodes_held = GaugeMetricFamily("vnode_sync_coordinator_user_nodes_held",
                                       "Storage nodes whose last report shows the user held at its limit",
                                       labels=["user"])
        rate = GaugeMetricFamily("vnode_sync_coordinator_user_rate_bytes_per_second",
                                 "What the user moves over every storage node, as their agents last reported it",
                                 labels=["user", "direction"])
        rates = by_user(self.cluster.ledger.user_rates())
        for record in users:
            active.add_metric([record.name], 1 if record.active else 0)
            priority.add_metric([record.name], record.effective_priority)
            nodes_held.add_metric([record.name], held.get(record.name, 0))
            read, write = rates.get(record.name, (0.0, 0.0))
            rate.add_metric([record.name, "read"], read)
            rate.add_metric([record.name, "write"], write)
        yield from (active, priority, nodes_held, rate)
        if self.cluster.weights is not None:
            given = GaugeMetricFamily("vnode_sync_coordinator_user_given_bytes_per_second",
                                      "What the last work-conserving step gives the user over every node whose "
                                      "edge shares by weight (its share of the cluster)", labels=["user", "direction"])
            for user, (read, write) in sorted(by_user(self.cluster.weights.given_totals()).items()):
                given.add_metric([user, "read"], read)
                given.add_metric([user, "write"], write)
            yield given


    def _groups(self) -> Iterator[Metric]:
        snapshot = self.cluster.publishing.snapshot()
        if not snapshot.groups:
            return
        members = group_members(snapshot.users, snapshot.groups)
        weight = GaugeMetricFamily("vnode_sync_coordinator_group_weight",
                                   "The group's weight among its siblings in the tree of weights", labels=["group"])
        rate = GaugeMetricFamily("vnode_sync_coordinator_group_rate_bytes_per_second",
                                 "What the users of the group's subtree move over every storage node, summed",
                                 labels=["group", "direction"])
        given = GaugeMetricFamily("vnode_sync_coordinator_group_given_bytes_per_second",
                                  "What the last work-conserving step gives the users of the group's subtree, summed",
                                  labels=["group", "direction"])
        rates = roll_up(members, by_user(self.cluster.ledger.user_rates()))
        shares = roll_up(members, by_user(self.cluster.weights.given_totals()) if self.cluster.weights is not None
                         else {})
        for group in snapshot.groups:
            weight.add_metric([group.name], group.weight)
            for family, values in ((rate, rates), (given, shares)):
                family.add_metric([group.name, "read"], values[group.name][0])
                family.add_metric([group.name, "write"], values[group.name][1])
        yield from (weight, rate, given)


class RpcMetrics(aio.ServerInterceptor):
    """Latency of every unary call and the error codes of every call, by service and method."""

    def __init__(self, registry: CollectorRegistry):
        self.duration = Histogram("vnode_sync_coordinator_rpc_duration_seconds",
                                  "Time the coordinator took to answer a unary gRPC call (streams excluded)",
                                  ["service", "method"], buckets=RPC_BUCKETS, registry=registry)
        self.errors = Counter("vnode_sync_coordinator_rpc_errors", "gRPC calls that ended with a status other "
                              "than OK", ["service", "method", "code"], registry=registry)

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        service, _, method = handler_call_details.method.rpartition("/")
        labels = (service.rpartition(".")[2], method)
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                self._unary(handler.unary_unary, labels), request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer)
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                self._stream(handler.unary_stream, labels), request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer)
        return handler

    def _failed(self, labels: tuple[str, str], context, error: BaseException | None) -> None:
        code = context.code()
        if code is None and error is not None:
            code = grpc.StatusCode.CANCELLED if isinstance(error, asyncio.CancelledError) else grpc.StatusCode.UNKNOWN
        if code is not None and code != grpc.StatusCode.OK:
            self.errors.labels(*labels, code.name).inc()

    def _unary(self, behavior, labels: tuple[str, str]):
        histogram = self.duration.labels(*labels)

        async def observed(request, context):
            start = time.perf_counter()
            try:
                response = await behavior(request, context)
            except BaseException as e:
                self._failed(labels, context, e)
                raise
            finally:
                histogram.observe(time.perf_counter() - start)
            self._failed(labels, context, None)
            return response
        return observed

    def _stream(self, behavior, labels: tuple[str, str]):
        """Streams that write with context.write (a coroutine) stay a coroutine; gRPC tells them apart."""
        if inspect.isasyncgenfunction(behavior):
            async def yielding(request, context):
                try:
                    async for item in behavior(request, context):
                        yield item
                except BaseException as e:
                    self._failed(labels, context, e)
                    raise
                self._failed(labels, context, None)
            return yielding

        async def writing(request, context):
            try:
                await behavior(request, context)
            except BaseException as e:
                self._failed(labels, context, e)
                raise
            self._failed(labels, context, None)
        return writing
