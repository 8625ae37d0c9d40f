"""The one config loader: every config kind refuses a bad file in the same one line, naming the
file, the key, the value and what is allowed; every settings field is documented."""

import glob
import inspect
import os
import re
import typing

import pytest
from pydantic import BaseModel

from vnode_sync.agents.config import AgentConfig, load_agent_config
from vnode_sync.batch.settings import BatchSettings, load_settings
from vnode_sync.config_loading import Settings, describe, load
from vnode_sync.coordinator.config import CoordinatorConfig, load_config
from vnode_sync.ctl.settings import CtlSettings, load_ctl_settings
from vnode_sync.errors import ConfigError, InvalidSetting

# Every config kind, with a file it accepts (the smallest) and its loader as the programs call it.
KINDS = {
    "coordinator": (load_config, ""),
    "agent": (load_agent_config, "node_id: n1\n"),
    "batch hooks": (lambda path: load_settings(path, env={}), ""),
    "vnodectl": (load_ctl_settings, ""),
}

BAD_FILES = [
    (b"listen: \xff\xfe\n", "(whole file): got byte 0xff at offset 8; allowed: UTF-8 text"),
    (b"- a\n- b\n", "(whole file): got a list at the top; allowed: a mapping of keys to values"),
    (b"just words\n", "(whole file): got text at the top; allowed: a mapping of keys to values"),
    (b"a: [1, 2\n", "(whole file): got invalid YAML at line 2, column 1 (expected ',' or ']', but got "
                    "'<stream end>'); allowed: YAML text"),
    (b"a: 1\na: 2\n", "(whole file): got invalid YAML at line 2, column 1 (key 'a' is given twice); "
                      "allowed: YAML text"),
    (b"colour: blue\n", "colour: got an unknown key (value 'blue'); allowed: keys "),
]


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("content,message", BAD_FILES)
def test_every_kind_refuses_a_bad_file_in_the_same_one_line(tmp_path, kind, content, message):
    loader, good = KINDS[kind]
    path = tmp_path / "bad.yaml"
    path.write_bytes(good.encode() + content if content.startswith(b"colour") else content)
    with pytest.raises(InvalidSetting) as e:
        loader(str(path))
    assert str(e.value).startswith(f"config {path}: {message}")
    assert "\n" not in str(e.value) and isinstance(e.value, ConfigError)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_says_when_its_file_is_missing(tmp_path, kind):
    with pytest.raises(InvalidSetting) as e:
        KINDS[kind][0](str(tmp_path / "nope.yaml"))
    assert str(e.value) == f"config {tmp_path}/nope.yaml: (whole file): got no such file; " \
                           "allowed: the path of a readable YAML file"


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_loads_its_smallest_file(tmp_path, kind):
    loader, good = KINDS[kind]
    path = tmp_path / "good.yaml"
    path.write_text(good)
    assert isinstance(loader(str(path)), Settings)


def test_an_empty_file_is_all_defaults_and_a_required_key_is_named(tmp_path):
    path = tmp_path / "empty.yaml"
    path.write_text("# nothing yet\n")
    assert load(str(path), CoordinatorConfig) == CoordinatorConfig()
    with pytest.raises(InvalidSetting) as e:
        load(str(path), AgentConfig)
    assert str(e.value) == (f"config {path}: node_id: got nothing; allowed: 1-63 characters from A-Z, a-z, "
                            "0-9, '.', '_', '-' (required)")


def test_an_unreadable_file_is_named(tmp_path):
    with pytest.raises(InvalidSetting, match=r"\(whole file\): got a file that cannot be read \(Is a directory\)"):
        load(str(tmp_path), CoordinatorConfig)


def test_a_long_value_is_cut_to_one_short_line(tmp_path):
    path = tmp_path / "long.yaml"
    path.write_text("listen: " + "x\\n" * 100 + "\nlog_format: " + '"' + "a\\nb" * 40 + '"\n')
    with pytest.raises(InvalidSetting) as e:
        load(str(path), CoordinatorConfig)
    assert "\n" not in str(e.value) and str(e.value).endswith("...; allowed: one of plain, json")


@pytest.mark.parametrize("annotation,text", [
    (typing.Annotated[float, __import__("annotated_types").Gt(0)], "a number above 0"),
    (typing.Literal["a", "b"], "one of a, b"),
    (bool, "true or false"),
    (tuple[int, ...], "a list, each item a whole number"),
    (dict[str, int], "a mapping, each key text and each value a whole number"),
])
def test_what_is_allowed_is_said_in_words(annotation, text):
    assert describe(annotation) == text


def _settings_classes() -> set[type]:
    found, todo = set(), [CoordinatorConfig, AgentConfig, BatchSettings, CtlSettings]
    while todo:
        cls = todo.pop()
        if cls in found:
            continue
        found.add(cls)
        for field in cls.model_fields.values():
            todo += [t for t in _types_in(field.annotation) if inspect.isclass(t) and issubclass(t, BaseModel)]
    return found


def _types_in(annotation) -> list:
    return [annotation, *[t for arg in typing.get_args(annotation) for t in _types_in(arg)]]


def test_every_setting_is_documented():
    undocumented = [f"{cls.__name__}.{name}" for cls in _settings_classes()
                    for name, field in cls.model_fields.items() if not field.description and name != "kind"]
    assert not undocumented
    assert len(_settings_classes()) >= 14   # each config kind and each of its sections


def test_the_documented_examples_load(tmp_path):
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    blocks = []
    for doc in ["README.md", *sorted(glob.glob("docs/*.md", root_dir=repo))]:
        with open(os.path.join(repo, doc)) as f:
            blocks += re.findall(r"```yaml\n(.*?)```", f.read(), re.S)
    loaders = {"# coordinator.yaml": load_config, "# agent.yaml": load_agent_config}
    loaded = 0
    for i, block in enumerate(blocks):
        loader = next((load for head, load in loaders.items() if block.startswith(head)), None)
        if loader:
            path = tmp_path / f"{i}.yaml"
            path.write_text(block)
            loader(str(path))
            loaded += 1
    assert loaded == 4
