"""libyaml's reader of spec YAML (spec/libyaml_load.py) gives the tree ruamel's own
round-trip reader gives (keys, values, scalar types, every line and column), on every
YAML file of the repository and on random documents; where it might not, it does not
answer, and ruamel's reader reads the text and reports its errors as before."""

from __future__ import annotations

import subprocess
import warnings
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from byoc.errors import SpecError
from byoc.spec import libyaml_load as module
from byoc.spec.libyaml_load import libyaml_load
from byoc.spec.yaml_doc import YamlDoc, round_trip_yaml

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(module.CParser is None, reason="ruamel.yaml.clib is not installed")


def ruamel_read(text: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return round_trip_yaml().load(text)


def differences(a, b, path: str = "$") -> list[str]:
    """Where the trees ``a`` and ``b`` differ: type, value, or a position."""
    if type(a) is not type(b):
        return [f"{path}: {type(a).__name__} vs {type(b).__name__}"]
    if isinstance(a, (CommentedMap, CommentedSeq)):
        keys_a = list(a) if isinstance(a, CommentedMap) else list(range(len(a)))
        keys_b = list(b) if isinstance(b, CommentedMap) else list(range(len(b)))
        if keys_a != keys_b:
            return [f"{path}: keys {keys_a} vs {keys_b}"]
        if (a.lc.line, a.lc.col) != (b.lc.line, b.lc.col) or (a.lc.data or {}) != (b.lc.data or {}):
            return [f"{path}: positions {a.lc.line, a.lc.col, a.lc.data} vs {b.lc.line, b.lc.col, b.lc.data}"]
        return [d for k in keys_a for d in differences(a[k], b[k], f"{path}.{k}")]
    same = a == b or (a != a and b != b)  # NaN
    return [] if same else [f"{path}: {a!r} vs {b!r}"]


def repository_yaml() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "*.yaml", "*.yml"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.split()
    return [ROOT / name for name in listed] or sorted(ROOT.glob("spec/**/*.yaml"))


def test_every_yaml_file_of_the_repository_reads_the_same():
    answered = 0
    for path in repository_yaml():
        text = path.read_text(encoding="utf-8")
        fast = libyaml_load(text)
        if fast is None:
            continue
        answered += 1
        assert differences(fast, ruamel_read(text)) == [], path
    assert answered >= 0.9 * len(repository_yaml())


def test_the_shipped_specs_are_read_by_libyaml():
    for path in [ROOT / "spec" / "ops.yaml", *sorted((ROOT / "spec" / "backends").glob("**/*.yaml"))]:
        assert libyaml_load(path.read_text(encoding="utf-8")) is not None, path


@pytest.mark.parametrize(
    "text",
    [
        "a: &x [1]\nb: &x [2]\nc: *x\n",  # an anchor defined twice: ruamel's reader says so
        "a: 1\na: 2\n",  # a duplicate key
        "a: 'bad \x01 char'\n",  # a character libyaml does not accept
        "a:\n  b:\n  c: 1\n",  # an empty value: positioned differently by libyaml
        "a: null\n",
        "%YAML 1.1\n---\na: yes\n",  # the version comes from ruamel's scanner
        "just a scalar\n",
        "a: [1, 2\n",  # a syntax error
    ],
)
def test_texts_it_might_read_differently_are_left_to_ruamel(text):
    assert libyaml_load(text) is None


def test_an_alias_bomb_is_read_in_linear_time():
    """Nested aliases share their anchors' objects: 9**40 paths to 40 lists are looked
    at once each (and YamlDoc then refuses the document, as before)."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 40)]
    root = libyaml_load("\n".join(lines) + "\n")
    assert root is not None and root["a39"][0] is root["a38"]
    with pytest.raises(SpecError, match="alias"):
        YamlDoc("bomb.yaml", "\n".join(lines) + "\n")


def test_errors_are_reported_by_ruamel_as_before():
    with pytest.raises(SpecError, match="the anchor &x is defined twice") as info:
        YamlDoc("t.yaml", "a: &x [1]\nb: &x [2]\nc: *x\n")
    assert info.value.location.line == 2
    with pytest.raises(SpecError, match="duplicate key 'a'") as info:
        YamlDoc("t.yaml", "a: 1\na: 2\n")
    assert info.value.location.line == 2


def test_without_libyaml_ruamel_reads_everything(monkeypatch):
    text = (ROOT / "spec" / "backends" / "json.yaml").read_text(encoding="utf-8")
    with_libyaml = libyaml_load(text)
    monkeypatch.setattr(module, "CParser", None)
    assert libyaml_load(text) is None
    assert differences(YamlDoc("json.yaml", text).root, with_libyaml) == []


scalars = st.one_of(
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=False, width=32),
    st.booleans(),
    st.text(st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]), max_size=12),
    st.sampled_from(["yes", "no", "on", "0o17", "0x1F", "1e3", "~", "null", "a: b", "- x", "# c"]),
)
keys = st.text(st.characters(min_codepoint=97, max_codepoint=122), min_size=1, max_size=6)
documents = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=4)),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(document=st.dictionaries(keys, documents, min_size=1, max_size=5), flow=st.booleans())
def test_random_documents_read_the_same(document, flow):
    """ruamel writes a random document (block or flow style, quoting what needs it);
    wherever libyaml answers, its tree is ruamel's."""
    import io

    yaml = round_trip_yaml()
    yaml.default_flow_style = flow
    out = io.StringIO()
    yaml.dump(document, out)
    text = out.getvalue()
    fast = libyaml_load(text)
    if fast is not None:
        assert differences(fast, ruamel_read(text)) == [], text
