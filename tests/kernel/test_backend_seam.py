"""Every backend fits the seam: all of LimitEnforcer with the same signatures, and a placer
that is either None or all of ThreadPlacer. Checks the classes only: nothing is started."""

import inspect

import pytest

from vnode_sync.datanode.backend import DataNodeThrottleBackend
from vnode_sync.kernel.backend import LimitEnforcer, ThreadPlacer
from vnode_sync.kernel.blkio_v1 import BlkioV1Backend
from vnode_sync.kernel.io_v2 import IoV2Backend
from vnode_sync.kernel.lustre_tbf import LustreTbfBackend

BACKENDS = {"blkio-v1": BlkioV1Backend, "io-v2": IoV2Backend, "lustre-tbf": LustreTbfBackend,
            "datanode-throttle": DataNodeThrottleBackend}
CGROUP_BACKENDS = {"blkio-v1", "io-v2"}


def methods(protocol) -> dict[str, inspect.Signature]:
    return {name: inspect.signature(member) for name, member in vars(protocol).items()
            if callable(member) and not name.startswith("_")}


def parameters(signature: inspect.Signature) -> list[str]:
    return [p.name for p in signature.parameters.values()]


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_every_backend_is_a_limit_enforcer_with_the_protocols_signatures(name):
    backend = BACKENDS[name]
    assert backend.name == name
    assert isinstance(getattr(backend, "shares_by_weight", None), (bool, property)), f"{name} lacks shares_by_weight"
    assert getattr(backend, "volume_queues", None) == (), f"{name} lacks volume_queues, () until a usage read"
    for method, signature in methods(LimitEnforcer).items():
        assert callable(getattr(backend, method, None)), f"{name} lacks {method}"
        assert parameters(inspect.signature(getattr(backend, method))) == parameters(signature), \
            f"{name}.{method} does not take the protocol's parameters"


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_only_cgroup_backends_are_thread_placers_and_the_others_have_no_placement_at_all(name):
    backend = BACKENDS[name]
    if name in CGROUP_BACKENDS:
        placer = backend("/nonexistent", "vnode-sync.test")   # no file is touched before setup()
        assert placer.placer is placer
        for method, signature in methods(ThreadPlacer).items():
            assert parameters(inspect.signature(getattr(backend, method))) == parameters(signature)
        assert isinstance(placer.places_threads, bool)
    else:
        assert backend.placer is None
        assert not any(hasattr(backend, m) for m in methods(ThreadPlacer)), \
            f"{name} has no threads to place and must not pretend to"
