"""One typed loader for every vnode-sync config file and section.

Each config kind (coordinator, agent, batch hooks, vnodectl) and each section in it is a
`Settings` class, one per concern, every field with its type, its range and a docstring that
says its unit and why its default. `load(path, Kind)` reads the YAML file and validates it
whole; a plug-in's section (a discovery kind) is the plug-in's own Settings class, chosen by
its `kind` (`plugin_section`). Whatever is wrong ends in one `InvalidSetting` line:

    config /etc/vnode-sync/agent.yaml: discovery.poll_seconds: got 'fast'; allowed: a number above 0 (seconds)

Why pydantic v2 (strict, extra="forbid") and not our former helpers (`typed`,
`reject_unknown_keys`) grown further: it already checks strict types ("5" is not 5, true is
not 1), ranges, allowed values, unknown keys, nested sections and tagged plug-in sections,
and is well kept; all we add is the translation of its first error into our one line, below,
in one place. The hand-written helpers checked each key where it was read, so a section
nobody read (a plug-in's options until start) or a value read with `.get` slipped through.
The cost, 0.1-0.2 s more import per process start (pydantic and building the classes), matters only
for the batch hooks, whose budget is 5 s.
"""

import datetime
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

import annotated_types as at
import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError

from vnode_sync import validation
from vnode_sync.errors import InvalidArgument, InvalidSetting

S = TypeVar("S", bound="Settings")
T = TypeVar("T")

WHOLE_FILE = "(whole file)"
_SHOWN_MAX = 60


class Settings(BaseModel):
    """Base of every settings class: strict types, unknown keys refused, read-only once loaded."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True, use_attribute_docstrings=True)


@dataclass(frozen=True)
class Unit:
    """The unit of a number, said in what is allowed: Annotated[float, Unit("seconds")]."""

    name: str


@dataclass(frozen=True)
class Allowed:
    """What a value must be, in words, where its type and bounds do not say it (a name's pattern)."""

    text: str


@dataclass(frozen=True)
class Internal:
    """A setting nobody running a site should change (a test seam, or a period fixed by measurement):
    still read from the file, but out of the documented surface (docs/settings.md) and its count."""

    why: str


@dataclass(frozen=True)
class Group:
    """The heading a file's own key is listed under in docs/settings.md (sections are their own group)."""

    name: str


# A path tests point at a fake tree; a period or threshold set by measurement (its docstring says which).
TEST_SEAM = Internal("a test seam: tests point it at a fake tree")
MEASURED = Internal("set by measurement; a site has no reason to move it")


@dataclass(frozen=True)
class _PluginKey:
    key: str
    kinds: tuple[str, ...]


class Refused(ValueError):
    """A settings class's own rule across fields failed: `key` (within the section), its value, what is allowed.

    A ValueError, so pydantic reports it at the section's place in the file.
    """

    def __init__(self, key: str, value: Any, allowed: str):
        super().__init__(f"{key}: got {value!r}; allowed: {allowed}")
        self.key, self.value, self.allowed = key, value, allowed


# A YAML list. Sequences are the one place strict mode is relaxed (a list becomes a tuple,
# so settings stay immutable); every item is still checked strictly.
ListOf = Annotated[tuple[T, ...], Field(strict=False)]
Seconds = Annotated[float, at.Gt(0), Unit("seconds")]
LogFormat = Literal["plain", "json"]


def checked_by(check: Callable[[Any], Any], allowed: str) -> Any:
    """A value type checked by one of vnode_sync.validation's functions, so config and API share a rule."""

    def run(value):
        try:
            return check(value)
        except InvalidArgument as e:
            raise ValueError(str(e)) from e

    return Annotated[Any, AfterValidator(run), Allowed(allowed)]


# The values that cross a trust boundary, checked by the same rules as at the gRPC API.
UserName = checked_by(validation.user_name, validation.USER_NAME_ALLOWED)
Uid = checked_by(validation.uid, validation.UID_ALLOWED)
NodeId = checked_by(validation.node_id, validation.NODE_ID_ALLOWED)
Priority = Annotated[int, at.Ge(validation.PRIORITY_MIN), at.Le(validation.PRIORITY_MAX)]


def plugin_section(kinds: Mapping[str, type["Settings"]], key: str = "kind", default: str | None = None) -> Any:
    """A section whose `key` names a plug-in; that plug-in's own Settings class validates it.

    Each class has a `key` field of Literal[its name]; with `default`, the key may be left out.
    """

    def tag(value):
        chosen = value.get(key, default) if isinstance(value, Mapping) else getattr(value, key, None)
        return chosen if isinstance(chosen, str) or chosen is None else repr(chosen)

    members = tuple(Annotated[cls, Tag(name)] for name, cls in kinds.items())
    return Annotated[Union[members], Discriminator(tag), _PluginKey(key, tuple(kinds))]


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping (PyYAML keeps the last silently)."""


def _no_duplicate_keys(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False):
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if not isinstance(key, (str, int, float, bool)):
            continue   # a list or mapping as a key: YAML allows it; the settings classes refuse it
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"key {key!r} is given twice", key_node.start_mark)
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _no_duplicate_keys)


def load_yaml_mapping(path: str) -> dict[str, Any]:
    """The file's top-level mapping ({} for an empty file); InvalidSetting if it is not one."""
    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.load(f, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except FileNotFoundError as e:
        raise InvalidSetting(path, WHOLE_FILE, "no such file", "the path of a readable YAML file") from e
    except OSError as e:
        raise InvalidSetting(path, WHOLE_FILE, f"a file that cannot be read ({e.strerror})",
                             "a file this user can read") from e
    except UnicodeDecodeError as e:
        raise InvalidSetting(path, WHOLE_FILE, f"byte 0x{e.object[e.start]:02x} at offset {e.start}",
                             "UTF-8 text") from e
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or "a syntax error"
        raise InvalidSetting(path, WHOLE_FILE, f"invalid YAML{where} ({problem})", "YAML text") from e
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise InvalidSetting(path, WHOLE_FILE, f"{_kind_of(data)} at the top", "a mapping of keys to values")
    return dict(data)


def load(path: str, kind: type[S]) -> S:
    """Read and validate the config file at `path` as `kind`."""
    return parse(load_yaml_mapping(path), kind, path)


def parse(raw: Any, kind: type[S], source: str, prefix: str = "") -> S:
    """Validate `raw` (a file's mapping, or one section of it at `prefix`) as `kind`."""
    try:
        return kind.model_validate(raw)
    except ValidationError as e:
        raise refusal(source, kind, e.errors()[0], prefix) from e


def refusal(source: str, kind: type, error: Mapping, prefix: str = "") -> InvalidSetting:
    """pydantic's first error as our one line: the key path, the value given, what is allowed."""
    loc = tuple(error["loc"])
    etype, given, ctx = error["type"], error.get("input"), error.get("ctx") or {}
    names, target, meta, parent = _walk(kind, loc)
    target, meta = _unwrapped(target, meta)
    key = ".".join(n for n in ([prefix] if prefix else []) + names) or WHOLE_FILE
    if etype == "extra_forbidden":
        keys = ", ".join(parent.model_fields) if parent is not None else "none"
        return InvalidSetting(source, key, f"an unknown key (value {_shown(given)})", f"keys {keys}")
    if etype == "missing":
        return InvalidSetting(source, key, "nothing", f"{describe(target, meta)} (required)")
    if etype == "value_error" and isinstance(ctx.get("error"), Refused):
        refused = ctx["error"]
        return InvalidSetting(source, f"{key}.{refused.key}" if key != WHOLE_FILE else refused.key,
                              _shown(refused.value), refused.allowed)
    if etype == "union_tag_invalid":
        plugin = _plugin_key(meta)
        name = plugin.key if plugin else "kind"
        return InvalidSetting(source, f"{key}.{name}", _shown(given.get(name) if isinstance(given, Mapping)
                                                             else ctx.get("tag")),
                              f"one of {', '.join(plugin.kinds) if plugin else ctx.get('expected_tags')}")
    allowed = describe(target, meta)
    if etype == "value_error" and not _allowed_text(meta):
        allowed = str(ctx.get("error") or error.get("msg"))
    return InvalidSetting(source, key, _shown(given), allowed)


def _walk(kind: type, loc: tuple) -> tuple[list[str], Any, list, type | None]:
    """Follow pydantic's error location through the settings types: shown names, the type there, its metadata."""
    names: list[str] = []
    target, meta, parent, key_type = kind, [], None, Any
    for part in loc:
        target, meta = _unwrapped(target, meta)
        if part == "[key]":    # pydantic's place for a bad key of a mapping: (..., key, "[key]")
            target, meta = key_type, []
        elif _is_settings(target):
            parent = target
            field = target.model_fields.get(part) if isinstance(part, str) else None
            names.append(str(part))
            target, meta = (field.annotation, list(field.metadata)) if field else (Any, [])
        elif _plugin_key(meta) is not None:
            members = {_tag_of(m): m for m in get_args(target)}
            target, meta = members.get(part, Any), []   # the tag itself is not part of the key path
        elif get_origin(target) in (tuple, list):
            item = get_args(target)[0]
            if names:
                names[-1] += f"[{part}]"
            else:
                names.append(f"[{part}]")
            target, meta = item, []
        elif get_origin(target) is dict:
            key_type, value_type = get_args(target)
            names.append(str(part))
            target, meta = value_type, []
        else:
            names.append(str(part))
            target, meta = Any, []
    return names, target, meta, parent


def _unwrapped(target: Any, meta: list) -> tuple[Any, list]:
    """Annotated[X, ...] -> X with its metadata collected; X | None -> X."""
    while True:
        if get_origin(target) is Annotated:
            args = get_args(target)
            target, meta = args[0], [*meta, *args[1:]]
        elif _is_union(target) and _plugin_key(meta) is None:
            members = [a for a in get_args(target) if a is not type(None)]
            if len(members) != 1:
                return target, meta
            target = members[0]
        else:
            return target, meta


def describe(target: Any, meta: list = ()) -> str:
    """What a value of this settings type may be, in words: 'a number above 0 (seconds)'."""
    target, meta = _unwrapped(target, list(meta))
    text = _allowed_text(meta)
    if text:
        return text
    plugin = _plugin_key(meta)
    if plugin is not None:
        return f"a mapping with {plugin.key}: one of {', '.join(plugin.kinds)}"
    origin = get_origin(target)
    if origin is Literal:
        return "one of " + ", ".join(str(v) for v in get_args(target))
    if _is_settings(target):
        return "a mapping with keys " + ", ".join(target.model_fields)
    if origin in (tuple, list):
        return f"a list, each item {describe(get_args(target)[0])}"
    if origin is dict:
        key_type, value_type = get_args(target)
        return f"a mapping, each key {describe(key_type)} and each value {describe(value_type)}"
    if target is bool:
        return "true or false"
    base = {int: "a whole number", float: "a number", str: "text"}.get(target, "a value")
    if target is str and any(isinstance(m, at.MinLen) and m.min_length for m in meta):
        base = "non-empty text"
    bounds = _bounds(meta, target is str)
    unit = next((f" ({m.name})" for m in meta if isinstance(m, Unit)), "")
    return f"{base}{bounds}{unit}"


def _bounds(meta: list, text: bool) -> str:
    low = next(((f"above {_num(m.gt)}", m.gt) for m in meta if isinstance(m, at.Gt)), None) \
        or next(((f"{_num(m.ge)} or more", m.ge) for m in meta if isinstance(m, at.Ge)), None)
    high = next((f"at most {_num(m.le)}" for m in meta if isinstance(m, at.Le)), None) \
        or next((f"below {_num(m.lt)}" for m in meta if isinstance(m, at.Lt)), None)
    parts = []
    if low and high and low[0].endswith("or more") and high.startswith("at most"):
        parts.append(f"from {_num(low[1])} to {high.removeprefix('at most ')}")
    else:
        parts += [p for p in (low[0] if low else None, high) if p]
    if text:
        longest = next((m.max_length for m in meta if isinstance(m, at.MaxLen)), None)
        if longest is not None:
            parts.append(f"at most {longest} characters")
    return (" " + ", ".join(parts)) if parts else ""


def _num(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _allowed_text(meta: list) -> str | None:
    return next((m.text for m in meta if isinstance(m, Allowed)), None)


def _plugin_key(meta: list) -> _PluginKey | None:
    return next((m for m in meta if isinstance(m, _PluginKey)), None)


def _tag_of(member: Any) -> str | None:
    return next((m.tag for m in get_args(member)[1:] if isinstance(m, Tag)), None) \
        if get_origin(member) is Annotated else None


def _is_settings(target: Any) -> bool:
    return isinstance(target, type) and issubclass(target, BaseModel)


def _is_union(target: Any) -> bool:
    return get_origin(target) in (Union, types.UnionType)


def _kind_of(value: Any) -> str:
    names = {list: "a list", str: "text", int: "a number", float: "a number", bool: "true/false",
             datetime.date: "a date", datetime.datetime: "a date and time"}
    return names.get(type(value), f"a {type(value).__name__}")


def _shown(value: Any) -> str:
    """The value as given, quoted, on one line and at most ~60 characters."""
    if value is None:
        return "nothing"
    text = repr(value)
    return text if len(text) <= _SHOWN_MAX else text[:_SHOWN_MAX - 3] + "..."


@dataclass(frozen=True)
class Documented:
    """One setting an admin sees: its key path, what it may be (with its unit), its default and why."""

    key: str
    allowed: str
    default: str
    why: str
    group: str = ""


def documented(kind: type["Settings"], prefix: str = "") -> list[Documented]:
    """Every setting of `kind` and its sections an admin sees, in file order; Internal ones left out.
    A section's settings are listed under its key (a list's under `key[]`), a plug-in's under each kind."""
    out = []
    for name, field in kind.model_fields.items():
        if any(isinstance(m, Internal) for m in field.metadata):
            continue
        target, meta = _unwrapped(field.annotation, list(field.metadata))
        plugin = _plugin_key(meta)
        if plugin is not None:
            choice = f"{prefix}{name}.{plugin.key}"
            default = field.get_default(call_default_factory=True)
            out.append(Documented(choice, f"one of {', '.join(plugin.kinds)}", _as_yaml(getattr(default, plugin.key, None)),
                                  f"Which plug-in reads the `{name}:` section; the other keys are its own."))
            for member in get_args(target):
                cls, _ = _unwrapped(member, [])
                out += [d for d in documented(cls, f"{prefix}{name}.") if d.key != choice]
            continue
        if get_origin(target) is tuple and _is_settings(get_args(target)[0]):
            out += documented(get_args(target)[0], f"{prefix}{name}[].")
            continue
        if _is_settings(target):
            out += documented(target, f"{prefix}{name}.")
            continue
        key = f"{prefix}{name}"
        default = "required" if field.is_required() else _as_yaml(field.get_default(call_default_factory=True))
        group = next((m.name for m in field.metadata if isinstance(m, Group)), "")
        out.append(Documented(key, describe(field.annotation, field.metadata), default,
                              " ".join((field.description or "").split()), group))
    return list({d.key: d for d in out}.values())   # a key several plug-ins share is listed once


def reference(title: str, kind: type["Settings"]) -> str:
    """The settings of `kind` an admin sees, as Markdown: one table per section (the file's own keys
    first), each setting with what it may be (its unit), its default and why."""
    sections: dict[str, list[Documented]] = {}
    for setting in documented(kind):
        section, _, _ = setting.key.rpartition(".")
        heading = f"`{section}:`" if section else setting.group or "The file's own keys"
        sections.setdefault(heading, []).append(setting)
    lines = [f"## {title}", ""]
    for heading, settings in sorted(sections.items(), key=lambda item: item[0].startswith("`")):
        lines += [f"### {heading}", "",
                  "| key | may be | default | why |", "|---|---|---|---|"]
        lines += [f"| `{s.key.rpartition('.')[2]}` | {_cell(s.allowed)} | {_cell(s.default)} | {_cell(s.why)} |"
                  for s in settings]
        lines.append("")
    return "\n".join(lines)


def _as_yaml(value: Any) -> str:
    """A default as it would be written in the YAML file."""
    if value is None:
        return "none"
    if isinstance(value, (tuple, list, dict)) and not value:
        return "[]" if not isinstance(value, dict) else "{}"
    return yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip() \
        if isinstance(value, (bool, str, int, float)) else str(value)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
