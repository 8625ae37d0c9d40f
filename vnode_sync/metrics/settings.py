"""The `metrics:` section of the coordinator's and the agents' configs, for the one typed loader.

    metrics: {listen: "0.0.0.0:9810"}                  # no section: no endpoint
    metrics: {listen: ..., tls: {ca, cert, key}}        # a server certificate of its own (SAN = host names)
    metrics: {listen: ..., plaintext: true}             # no TLS although the component has tls: (warned)
    metrics: {listen: ..., top_users: 20}               # agents: users named per node (docs/metrics.md)

Off by default: an agent runs as root and otherwise listens on nothing, and the endpoint names
every user and its rates, so a site opens it on purpose, at an address it chooses.
"""

from typing import Annotated

import annotated_types as at
from pydantic import AfterValidator, Field, model_validator

from vnode_sync.config_loading import Allowed, Refused, Settings
from vnode_sync.errors import ConfigError
from vnode_sync.security.tls import TlsFiles, TransportSecurity, is_loopback

# Users a storage agent names in its per-user series (the rest are user="(other)"): a node's disks keep
# a few users busy at once, and a Grafana top-N of 20 shows who they are; 20 x 12 series a user keep a
# 10,000-node site near 3 million series (docs/metrics.md, Cardinality).
DEFAULT_TOP_USERS = 20
TOP_USERS_MAX = 1000
LISTEN_ALLOWED = "host:port with a port 0..65535, e.g. '0.0.0.0:9810' or '[::]:9810'"


def _port_in_range(address: str) -> str:
    if int(address.rpartition(":")[2]) > 65535:
        raise ValueError(f"port above 65535 in {address!r}")
    return address


ListenAddress = Annotated[str, Field(pattern=r"^(\[[0-9A-Fa-f:.]+\]|[^\s:\[\]]+):[0-9]{1,5}$"),
                          AfterValidator(_port_in_range), Allowed(LISTEN_ALLOWED)]


class MetricsSettings(Settings):
    """The Prometheus endpoint (docs/metrics.md)."""

    listen: ListenAddress
    """Where /metrics is served."""
    tls: TlsFiles | None = None
    """The endpoint's own certificate (its SAN the names Prometheus scrapes); none: the component's tls:."""
    plaintext: bool = False
    """Serve plaintext although the component has tls: (a separate management network without client
    certificates); off, so that metrics follow the component's transport unless asked otherwise."""

    @model_validator(mode="after")
    def _tls_or_plaintext(self):
        if self.tls is not None and self.plaintext:
            raise Refused("plaintext", True, "false when a tls section is given (keep one of the two)")
        return self


class AgentMetricsSettings(MetricsSettings):
    """An agent's endpoint: also how many users its per-user series name."""

    top_users: Annotated[int, at.Ge(0), at.Le(TOP_USERS_MAX)] = DEFAULT_TOP_USERS
    """Users (per node) the storage agent serves per-user series for: those held at their limit first,
    then the busiest by bytes/s; every other user is summed into user="(other)". Each named user
    costs up to 12 series on every node (docs/metrics.md, Cardinality)."""


def plaintext_off_host(settings: MetricsSettings, component: TransportSecurity) -> bool:
    """True when the endpoint would serve plaintext off this host without having been asked to."""
    return (not settings.plaintext and settings.tls is None and component.tls is None and not component.insecure
            and not is_loopback(settings.listen))


def refuse_unasked_plaintext(settings: MetricsSettings | None, component: TransportSecurity) -> None:
    """For the configs' validators: the one-line refusal of plaintext metrics off this host."""
    if settings is not None and plaintext_off_host(settings, component):
        raise Refused("metrics.plaintext", False, f"true to serve metrics in plaintext on {settings.listen} "
                      "(off this host), or a tls section in the config")


def endpoint_tls(settings: MetricsSettings, component: TransportSecurity) -> TlsFiles | None:
    """The files the endpoint serves mutual TLS with; None means plaintext, which needs `plaintext: true`,
    a component with `insecure: true`, or a loopback listen address."""
    if plaintext_off_host(settings, component):
        raise ConfigError(f"metrics: no tls for {settings.listen!r}: serving metrics in plaintext off this host "
                          "needs plaintext: true (or tls in the config)")
    if settings.plaintext:
        return None
    return settings.tls or component.tls
