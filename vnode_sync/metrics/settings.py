"""The `metrics:` section of the coordinator's and the agents' configs.

    metrics: {listen: "0.0.0.0:9810"}                  # off without the section
    metrics: {listen: ..., tls: {ca, cert, key}}        # a server certificate of its own (SAN = host names)
    metrics: {listen: ..., plaintext: true}             # no TLS although the component has tls: (warned)

Off by default: an agent runs as root and otherwise listens on nothing, and the endpoint names
every user and its rates, so a site opens it on purpose, at an address it chooses.
"""

from dataclasses import dataclass

from vnode_sync.config_loading import reject_unknown_keys, typed
from vnode_sync.errors import ConfigError
from vnode_sync.security.tls import TlsFiles, TransportSecurity, is_loopback, parse_transport


@dataclass(frozen=True)
class MetricsSettings:
    listen: str = ""                 # host:port; "" = no metrics endpoint
    tls: TlsFiles | None = None      # the endpoint's own certificate; None = the component's tls:
    plaintext: bool = False          # serve plaintext even where the component has tls:

    @property
    def enabled(self) -> bool:
        return bool(self.listen)


def parse_metrics(section: str, raw) -> MetricsSettings:
    if raw is None:
        return MetricsSettings()
    if not isinstance(raw, dict):
        raise ConfigError(f"{section} must be a mapping with a listen address, e.g. {{listen: '0.0.0.0:9810'}}")
    reject_unknown_keys(section, raw, {"listen", "tls", "plaintext"})
    listen = typed(section, "listen", raw.get("listen"), str, "")
    host, _, port = listen.rpartition(":")
    if not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ConfigError(f"{section}.listen {listen!r} is not host:port (e.g. '0.0.0.0:9810' or '[::]:9810')")
    plaintext = typed(section, "plaintext", raw.get("plaintext"), bool, False)
    files = parse_transport(section, raw.get("tls"), None).tls
    if files is not None and plaintext:
        raise ConfigError(f"{section}: has both tls and plaintext: true; keep one")
    return MetricsSettings(listen, files, plaintext)


def endpoint_tls(settings: MetricsSettings, component: TransportSecurity, section: str = "metrics") -> TlsFiles | None:
    """The files the endpoint serves mutual TLS with; None means plaintext, which needs `plaintext: true`,
    a component with `insecure: true`, or a loopback listen address."""
    if settings.plaintext:
        return None
    if settings.tls is not None:
        return settings.tls
    if component.tls is not None:
        return component.tls
    if component.insecure or is_loopback(settings.listen):
        return None
    raise ConfigError(f"{section}: no tls for {settings.listen!r}: serving metrics in plaintext off this host needs "
                      "plaintext: true (or tls in the config)")
