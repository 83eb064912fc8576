"""Untrusted YAML to plain Python values, bounded, straight from the parser's events.

    data = load(text, max_depth=64, max_alias_values=200_000)    # Limit(message, line) past a bound

Plain tags only (str, int, float, bool, null, map, seq, merge keys, timestamps kept as their text in Timestamp),
no duplicate keys, nesting at most max_depth, and aliases may add at most max_alias_values values to the document
(a "billion laughs" is refused when it passes that, never expanded).  No node tree is built: the values are made
as the events arrive, from libyaml's parser when PyYAML has it, which loads a 10,000-stage workflow model in about
a second where composing nodes took 16 s and 240 MB.  libyaml itself stops at 1,000 levels, before any bound here
matters, so its C recursion is bounded too.
"""
from __future__ import annotations

import gc
import re

import yaml         # attributes used only inside load(): `--help` defers PyYAML (mtcio/cli.py), so no `from yaml...`

_T = "tag:yaml.org,2002:"
STR, INT, FLOAT, BOOL, NULL, MAP, SEQ, MERGE, TIMESTAMP = (_T + t for t in (
    "str", "int", "float", "bool", "null", "map", "seq", "merge", "timestamp"))
_PLAIN_INT = re.compile(r"[-+]?(?:0|[1-9][0-9]*)\Z")


class Limit(Exception):
    """The document passed a bound or is not plain YAML; .line is its 1-based line (None when unknown)."""

    def __init__(self, message: str, mark=None):
        super().__init__(message)
        self.line = mark.line + 1 if mark is not None else None


class Timestamp(str):
    """An unquoted date or time (YAML's timestamp), kept as the text it was written as; a field that wants a
    name can tell it from a string."""


def show(v) -> str:
    """A value for an error message: short, one line."""
    if isinstance(v, (dict, list)):
        return f"a {'mapping' if isinstance(v, dict) else 'list'}"
    text = repr(str(v) if isinstance(v, Timestamp) else v)
    return text if len(text) <= 60 else text[:57] + "..."


def _scalar(tag: str, value: str, ev):
    try:
        if tag == STR:
            return value
        if tag == INT:
            return int(value) if _PLAIN_INT.match(value) else _SCALARS.construct_yaml_int(_node(value))
        if tag == FLOAT:
            if "_" in value or ":" in value or value[-1:].isalpha():      # 1_0.5, 1:30.0, .inf, .nan
                return _SCALARS.construct_yaml_float(_node(value))
            return float(value)
        if tag == NULL:
            return None
        if tag == BOOL:
            return _SCALARS.construct_yaml_bool(_node(value))
        if tag == TIMESTAMP:
            return Timestamp(value)
    except (ValueError, TypeError, AttributeError, OverflowError, KeyError):
        raise Limit(f"value {show(value)} is not a valid {tag.rsplit(':', 1)[-1]}", ev.start_mark) from None
    raise Limit(f"tag {show(tag)} not allowed (plain YAML only)", ev.start_mark)


def _node(value: str):
    return yaml.ScalarNode(None, value)


_SCALARS = None     # PyYAML's rules for the int and float forms the fast path skips (made at the first load)


def loader_class():
    """libyaml's parser when PyYAML has it, else PyYAML's own."""
    return getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader


class _Open:
    """A sequence or mapping being filled."""
    __slots__ = ("value", "is_list", "anchor", "size", "mark", "key", "key_mark", "has_key", "merges")

    def __init__(self, value, anchor, mark):
        self.value, self.anchor, self.mark = value, anchor, mark
        self.is_list = isinstance(value, list)
        self.size = 1
        self.has_key, self.key, self.key_mark, self.merges = False, None, None, None


def load(text: str, max_depth: int, max_alias_values: int):
    """The single document of `text` as Python values (None when empty).  Raises Limit, or yaml.YAMLError for
    text that is not YAML."""
    enabled = gc.isenabled()
    gc.disable()        # millions of new containers and no garbage: collecting as they grow made loading quadratic
    global _SCALARS
    if _SCALARS is None:
        _SCALARS = yaml.constructor.SafeConstructor()
    try:
        try:
            return _load_with(loader_class(), text, max_depth, max_alias_values)
        except yaml.MarkedYAMLError as e:
            if "maximum nesting depth" in str(e.problem):      # libyaml's own bound (1,000 levels) met first
                raise Limit(f"nested deeper than {max_depth} levels", e.problem_mark) from None
            # libyaml refuses the \uDCxx escapes of a name's undecodable bytes (how `mtcprof model` writes
            # them); PyYAML's own parser reads them
            if "invalid Unicode character escape" in str(e.problem) and loader_class() is not yaml.SafeLoader:
                return _load_with(yaml.SafeLoader, text, max_depth, max_alias_values)
            raise
    finally:
        if enabled:
            gc.enable()


def compose(text: str):
    """The node tree of a document load() accepted (for the lines of its fields), with the same parser fallback."""
    try:
        return yaml.compose(text, Loader=loader_class())
    except yaml.YAMLError:
        return yaml.compose(text, Loader=yaml.SafeLoader)


def _load_with(cls, text: str, max_depth: int, max_alias_values: int):
    loader = cls(text)
    try:
        return _build(loader, max_depth, max_alias_values)
    finally:
        loader.dispose()


def _build(loader, max_depth: int, max_alias_values: int):
    """The event loop: the hot path (a plain or quoted scalar into a sequence or mapping) kept to few steps."""
    ev_ = yaml.events
    ScalarEvent, AliasEvent, StreamEndEvent = ev_.ScalarEvent, ev_.AliasEvent, ev_.StreamEndEvent
    SequenceStartEvent, SequenceEndEvent = ev_.SequenceStartEvent, ev_.SequenceEndEvent
    MappingStartEvent, MappingEndEvent = ev_.MappingStartEvent, ev_.MappingEndEvent
    DocumentStartEvent, DocumentEndEvent = ev_.DocumentStartEvent, ev_.DocumentEndEvent
    get = loader.get_event
    resolve = loader.resolve
    plain: dict = {}            # text of a plain scalar -> its tag: a model repeats its keys and many values
    ev = get()
    if not isinstance(ev, ev_.StreamStartEvent):
        raise Limit("not a YAML stream")
    ev = get()
    if isinstance(ev, StreamEndEvent):
        return None
    first = ev
    stack: list[_Open] = []
    top = None                  # stack[-1]
    anchors: dict = {}          # anchor -> (value, expanded size); None while its node is still open
    distinct = 0
    root = None
    done = False
    while True:
        ev = get()
        cls = ev.__class__
        if cls is ScalarEvent:
            if len(stack) >= max_depth:
                raise Limit(f"nested deeper than {max_depth} levels", ev.start_mark)
            value, tag = ev.value, ev.tag
            if tag is None or tag == "!":
                if ev.implicit[0]:
                    tag = plain.get(value)
                    if tag is None:
                        tag = plain[value] = resolve(yaml.ScalarNode, value, ev.implicit)
                else:
                    tag = STR           # quoted: a string, whatever it looks like
            size = 1
            distinct += 1
            if tag != STR:
                value = None if tag == MERGE else _scalar(tag, value, ev)    # merge: only as a key, checked there
            if ev.anchor is not None:
                anchors[ev.anchor] = (value, 1)
        elif cls is MappingStartEvent or cls is SequenceStartEvent:
            if len(stack) >= max_depth:
                raise Limit(f"nested deeper than {max_depth} levels", ev.start_mark)
            tag = ev.tag
            want = SEQ if cls is SequenceStartEvent else MAP
            if tag is not None and tag != "!" and tag != want:
                raise Limit(f"tag {show(tag)} not allowed (plain YAML only)", ev.start_mark)
            distinct += 1
            top = _Open([] if want == SEQ else {}, ev.anchor, ev.start_mark)
            stack.append(top)
            if ev.anchor is not None:
                anchors[ev.anchor] = None
            continue
        elif cls is MappingEndEvent or cls is SequenceEndEvent:
            o = stack.pop()
            top = stack[-1] if stack else None
            if o.merges:
                _merge(o)
            value, size, tag = o.value, o.size, None
            if size > max_alias_values + distinct:
                raise Limit(f"the document expands to more than {max_alias_values:,} values (aliases)", o.mark)
            if o.anchor is not None:
                anchors[o.anchor] = (value, size)
        elif cls is AliasEvent:
            got = anchors.get(ev.anchor, False)
            if got is None:
                raise Limit("an alias refers to the node that contains it", ev.start_mark)
            if got is False:
                raise Limit(f"alias {show(ev.anchor)} names no anchor before it", ev.start_mark)
            value, size = got
            tag = None
        elif cls is DocumentEndEvent:
            done = True
            continue
        elif cls is StreamEndEvent:
            return root
        elif cls is DocumentStartEvent and done:
            raise yaml.composer.ComposerError("expected a single document in the stream", first.start_mark,
                                              "but found another document", ev.start_mark)
        else:
            raise Limit(f"unexpected {cls.__name__}", ev.start_mark)
        # a complete value: into its parent
        p = top
        if p is None:
            root = value
            continue
        p.size += size
        if p.is_list:
            p.value.append(value)
        elif p.has_key:
            if p.key is _MERGE_KEY:
                srcs = value if isinstance(value, list) else [value]
                if not all(isinstance(s, dict) for s in srcs):
                    raise Limit("a merge key (<<) takes a mapping or a list of mappings", p.key_mark)
                p.merges = (p.merges or []) + srcs
            else:
                p.value[p.key] = value
            p.has_key = False
        else:
            p.has_key, p.key_mark = True, ev.start_mark
            if tag == MERGE:
                p.key = _MERGE_KEY
                continue
            try:
                dup = value in p.value
            except TypeError:            # a list or mapping as key
                raise Limit("a key must be a plain value", ev.start_mark) from None
            if dup:
                raise Limit(f"duplicate key {show(value)}", ev.start_mark)
            p.key = value


_MERGE_KEY = object()


def _merge(o: _Open) -> None:
    """<<: its mappings' keys where the mapping has none of its own; the first mapping listed wins (YAML's rule)."""
    d = o.value
    for src in o.merges:
        for k, v in src.items():
            if k not in d:
                d[k] = v
