"""Reading YAML config files into plain mappings, with one-line errors."""

from collections.abc import Mapping
from typing import Any

import yaml

from vnode_sync.errors import ConfigError


def load_yaml_mapping(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except FileNotFoundError as e:
        raise ConfigError(f"config file {path!r} does not exist") from e
    except OSError as e:
        raise ConfigError(f"config file {path!r} cannot be read: {e.strerror}") from e
    except UnicodeDecodeError as e:
        raise ConfigError(f"config file {path!r} is not UTF-8 text (byte {e.start}: "
                          f"{e.object[e.start:e.start + 1]!r}); save it as UTF-8") from e
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or "invalid YAML"
        raise ConfigError(f"config file {path!r} is not valid YAML{where}: {problem}") from e
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"config file {path!r} must hold a mapping at the top, not {type(data).__name__}")
    return dict(data)


def reject_unknown_keys(section: str, given: Mapping, allowed: set[str]) -> None:
    unknown = sorted(set(given) - allowed)
    if unknown:
        raise ConfigError(f"unknown key(s) {', '.join(map(repr, unknown))} in {section}; "
                          f"allowed: {', '.join(sorted(allowed))}")


def typed(section: str, key: str, value, kind, default=None):
    if value is None:
        return default
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ConfigError(f"{section}.{key} must be {kind.__name__}, got {value!r}")
    return value
