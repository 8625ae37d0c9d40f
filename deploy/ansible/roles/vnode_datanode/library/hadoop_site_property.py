#!/usr/bin/python
"""Set one property of a Hadoop *-site.xml where its value differs, changing nothing else in the file.

community.general.xml would do, but Debian's ansible-core ships no collections and the roles need no
network: so the file's text is edited in place (the property's <value>, or a new <property> before
</configuration>), and the result is parsed back to check that it holds the value and is still XML.
"""

from __future__ import annotations   # RHEL 9's /usr/bin/python3 is 3.9

import os
import re
import tempfile
import xml.etree.ElementTree as ElementTree
from xml.sax.saxutils import escape

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: hadoop_site_property
short_description: Set one property in a Hadoop *-site.xml where it differs
options:
  path: {description: The file (it must exist), type: path, required: true}
  name: {description: The property name, type: str, required: true}
  value: {description: Its value, type: str, required: true}
supports_check_mode: true
"""

COMMENT = re.compile(r"<!--.*?-->", re.S)
PROPERTY = re.compile(r"<property\b[^>]*>.*?</property>", re.S)
VALUE = re.compile(r"<value\s*/>|<value\b[^>]*>.*?</value>", re.S)


def current_value(text: str, name: str) -> str | None:
    """The file's value of `name` as Hadoop reads it (the last definition wins), None if it has none."""
    found = None
    for prop in ElementTree.fromstring(text).iter("property"):
        if (prop.findtext("name") or "").strip() == name:
            found = (prop.findtext("value") or "").strip()
    return found


def with_value(text: str, name: str, value: str) -> str:
    comments = [m.span() for m in COMMENT.finditer(text)]
    named = re.compile(r"<name>\s*" + re.escape(escape(name)) + r"\s*</name>")
    blocks = [m for m in PROPERTY.finditer(text)
              if named.search(m.group(0)) and not any(start <= m.start() < end for start, end in comments)]
    if blocks:
        block = blocks[-1]
        old = block.group(0)
        new = (VALUE.sub(lambda _: f"<value>{escape(value)}</value>", old, count=1) if VALUE.search(old)
               else old.replace("</property>", f"<value>{escape(value)}</value></property>"))
        return text[:block.start()] + new + text[block.end():]
    close = text.rfind("</configuration>")
    if close < 0:
        raise ValueError("no </configuration> element")
    line_start = text.rfind("\n", 0, close) + 1
    added = (f"  <property>\n    <name>{escape(name)}</name>\n    <value>{escape(value)}</value>\n  </property>\n")
    return text[:line_start] + added + text[line_start:]


def main() -> None:
    module = AnsibleModule(argument_spec={"path": {"type": "path", "required": True},
                                          "name": {"type": "str", "required": True},
                                          "value": {"type": "str", "required": True}},
                           supports_check_mode=True)
    path, name, value = module.params["path"], module.params["name"], module.params["value"]
    try:
        with open(path) as f:
            before = f.read()
        was = current_value(before, name)
    except (OSError, ElementTree.ParseError) as e:
        module.fail_json(msg=f"{path}: {e}")
    if was == value:
        module.exit_json(changed=False, path=path, name=name, value=value)
    try:
        after = with_value(before, name, value)
        if current_value(after, name) != value:
            raise ValueError(f"{name} would not read {value!r} after the edit")
    except (ValueError, ElementTree.ParseError) as e:
        module.fail_json(msg=f"{path}: cannot set {name}: {e}; nothing changed")
    diff = {"before": before, "after": after, "before_header": path, "after_header": path}
    if not module.check_mode:
        descriptor, scratch = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), prefix=".hadoop-site.")
        with os.fdopen(descriptor, "w") as f:
            f.write(after)
        module.atomic_move(scratch, path)   # keeps the file's owner, mode and SELinux context
    module.exit_json(changed=True, path=path, name=name, value=value, previous=was, diff=diff)


if __name__ == "__main__":
    main()
