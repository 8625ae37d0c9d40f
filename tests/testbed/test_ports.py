"""testbed.ports: listening ports come from below the ephemeral range, free, and never twice."""

import socket

from testbed import ports


def _ephemeral_low() -> int:
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        return int(f.read().split()[0])


def test_ports_lie_below_the_range_outgoing_connections_are_given():
    chosen = ports.free_ports(20)
    assert all(ports.LOWEST_PORT <= port < _ephemeral_low() for port in chosen)


def test_ports_are_distinct_and_never_handed_out_twice():
    first, second = ports.free_ports(30), ports.free_ports(30)
    assert len(set(first)) == 30 and not set(first) & set(second)


def test_a_port_something_listens_on_is_passed_over(monkeypatch):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        offers = iter([taken, taken])
        real_choice = ports.random.choice
        monkeypatch.setattr(ports.random, "choice", lambda seq: next(offers, None) or real_choice(seq))
        assert ports.free_port() != taken


def test_reserved_ports_are_passed_over(tmp_path, monkeypatch):
    reserved = tmp_path / "reserved"
    reserved.write_text("12000,12002-12004\n")
    monkeypatch.setattr(ports, "_RESERVED", str(reserved))
    assert ports._reserved() == {12000, 12002, 12003, 12004}
    offers = iter([12000, 12003, 12001])
    monkeypatch.setattr(ports.random, "choice", lambda seq: next(offers))
    monkeypatch.setattr(ports, "_handed_out", set())
    monkeypatch.setattr(ports, "_is_free", lambda port: True)
    assert ports.free_port() == 12001
