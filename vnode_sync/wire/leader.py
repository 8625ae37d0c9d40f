"""Following the leading coordinator among several (issue 28).

A standby coordinator refuses every call with UNAVAILABLE and says where the leader is in the
trailing metadata key LEADER_KEY ("" while none is known). A client given several addresses
dials them through one FollowingChannel: a unary call that meets a standby, an unreachable
coordinator or one that cannot record a change right now goes to the named leader, else to the
next address, until its deadline; a stream that fails moves the channel the same way, and the
caller (the agent's link) opens it again. With one address nothing of this is used (the
single-coordinator default: a plain channel).
"""

import logging
import threading
import time
from collections.abc import Callable, Iterator

import grpc

log = logging.getLogger(__name__)

LEADER_KEY = "vnode-sync-leader"
# A unary call given no deadline gives up following after this long.
FOLLOW_SECONDS = 30.0
# After as many failed attempts as addresses, wait this long (doubling to the cap) before going on.
ROUND_PAUSE_SECONDS, ROUND_PAUSE_CAP_SECONDS = 0.1, 1.0


def split_addresses(text: str) -> list[str]:
    """"a:7070,b:7070" -> ["a:7070", "b:7070"] (spaces ignored, each address once)."""
    addresses = []
    for part in text.split(","):
        part = part.strip()
        if part and part not in addresses:
            addresses.append(part)
    return addresses


def leader_hint(error: grpc.RpcError) -> str | None:
    """The leader a standby named in its refusal ('' if it knows none), or None if not a standby's."""
    try:
        metadata = error.trailing_metadata() or ()
    except Exception:  # noqa: BLE001 - errors raised before a call started carry no metadata
        return None
    return next((value for key, value in metadata if key == LEADER_KEY), None)


def _follows(error: grpc.RpcError) -> bool:
    """Worth another coordinator: a standby's refusal, no answer, or a leader that cannot write now."""
    return error.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED) \
        or leader_hint(error) is not None


class FollowingChannel(grpc.Channel):
    """A grpc.Channel over several coordinators' addresses that sends each call to the leader."""

    def __init__(self, addresses: list[str], make_channel: Callable[[str], grpc.Channel]):
        if not addresses:
            raise ValueError("no coordinator address")
        self.addresses = list(addresses)
        self._make_channel = make_channel
        self._channels: dict[str, grpc.Channel] = {}
        self._lock = threading.Lock()
        self._current = 0

    @property
    def current(self) -> str:
        with self._lock:
            return self.addresses[self._current]

    def channel(self, address: str) -> grpc.Channel:
        with self._lock:
            if address not in self._channels:
                self._channels[address] = self._make_channel(address)
            return self._channels[address]

    def moved(self, failed: str, error: grpc.RpcError) -> None:
        """After `error` from `failed`: go to the leader it named, else the next address."""
        hint = leader_hint(error)
        with self._lock:
            if self.addresses[self._current] != failed:
                return   # another call moved already
            if hint and hint != failed:
                if hint not in self.addresses:   # a leader we were not told of: its certificate is checked all the same
                    self.addresses.append(hint)
                self._current = self.addresses.index(hint)
                return
            self._current = (self._current + 1) % len(self.addresses)

    def unary_unary(self, method, request_serializer=None, response_deserializer=None, **kwargs):
        return _FollowingUnary(self, lambda c: c.unary_unary(method, request_serializer, response_deserializer,
                                                               **kwargs))

    def unary_stream(self, method, request_serializer=None, response_deserializer=None, **kwargs):
        return _FollowingStream(self, lambda c: c.unary_stream(method, request_serializer, response_deserializer,
                                                                 **kwargs))

    def stream_unary(self, method, request_serializer=None, response_deserializer=None, **kwargs):
        return _FollowingOnce(self, lambda c: c.stream_unary(method, request_serializer, response_deserializer,
                                                               **kwargs))

    def stream_stream(self, method, request_serializer=None, response_deserializer=None, **kwargs):
        return _FollowingStream(self, lambda c: c.stream_stream(method, request_serializer, response_deserializer,
                                                                  **kwargs))

    def subscribe(self, callback, try_to_connect=False):
        raise NotImplementedError("FollowingChannel: subscribe to a channel of one address")

    def unsubscribe(self, callback):
        raise NotImplementedError("FollowingChannel: subscribe to a channel of one address")

    def close(self) -> None:
        with self._lock:
            channels, self._channels = list(self._channels.values()), {}
        for channel in channels:
            channel.close()

    def __enter__(self) -> "FollowingChannel":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _FollowingUnary:
    """A unary call, sent again to the leader (or the next address) until it is answered or its time is up."""

    def __init__(self, owner: FollowingChannel, bind: Callable[[grpc.Channel], Callable]):
        self._owner, self._bind = owner, bind

    def __call__(self, request, timeout: float | None = None, **kwargs):
        deadline = time.monotonic() + (timeout if timeout is not None else FOLLOW_SECONDS)
        pause, attempts = ROUND_PAUSE_SECONDS, 0
        while True:
            address = self._owner.current
            left = deadline - time.monotonic()
            try:
                return self._bind(self._owner.channel(address))(request, timeout=max(left, 0.01), **kwargs)
            except grpc.RpcError as e:
                if not _follows(e) or time.monotonic() >= deadline:
                    raise
                log.debug("coordinator %s: %s; following the leader", address, e.code().name)
                self._owner.moved(address, e)
                attempts += 1
                # A round: as many attempts as addresses (a standby may still name a leader that just
                # died, until ZooKeeper expires its session: no tight loop between the two meanwhile).
                if attempts % len(self._owner.addresses) == 0:
                    time.sleep(min(pause, max(deadline - time.monotonic(), 0)))
                    pause = min(pause * 2, ROUND_PAUSE_CAP_SECONDS)

    def with_call(self, request, timeout=None, **kwargs):
        raise NotImplementedError("FollowingChannel: call the method directly")

    def future(self, request, timeout=None, **kwargs):
        raise NotImplementedError("FollowingChannel: call the method directly")


class _FollowingOnce:
    """A call sent once (its request stream cannot be replayed); a failure moves the channel."""

    def __init__(self, owner: FollowingChannel, bind: Callable[[grpc.Channel], Callable]):
        self._owner, self._bind = owner, bind

    def __call__(self, request_iterator, *args, **kwargs):
        address = self._owner.current
        try:
            return self._bind(self._owner.channel(address))(request_iterator, *args, **kwargs)
        except grpc.RpcError as e:
            if _follows(e):
                self._owner.moved(address, e)
            raise


class _FollowingStream:
    """A response stream; when it fails the channel moves, and the caller opens a new one."""

    def __init__(self, owner: FollowingChannel, bind: Callable[[grpc.Channel], Callable]):
        self._owner, self._bind = owner, bind

    def __call__(self, request, *args, **kwargs) -> "_MovingCall":
        address = self._owner.current
        return _MovingCall(self._owner, address, self._bind(self._owner.channel(address))(request, *args, **kwargs))


class _MovingCall:
    def __init__(self, owner: FollowingChannel, address: str, call):
        self._owner, self._address, self._call = owner, address, call

    def __iter__(self) -> Iterator:
        return self

    def __next__(self):
        try:
            return next(self._call)
        except grpc.RpcError as e:
            if _follows(e):
                self._owner.moved(self._address, e)
            raise

    def __getattr__(self, name):   # cancel(), code(), details(), ...
        return getattr(self._call, name)


def dial(addresses: str, make_channel: Callable[[str], grpc.Channel]) -> grpc.Channel:
    """A channel to the coordinator at `addresses` ("host:port", or several comma-separated): a plain
    channel for one, a FollowingChannel for several."""
    listed = split_addresses(addresses)
    return make_channel(listed[0]) if len(listed) == 1 else FollowingChannel(listed, make_channel)
