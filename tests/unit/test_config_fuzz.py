"""Arbitrary YAML never crashes the loader with anything but a ConfigError."""

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from cdcwatch.config import ConfigError
from cdcwatch.validation import parse_config

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=20))
keys = st.sampled_from(["debezium", "listen", "name", "jmx", "host", "port", "url", "labels", "timeout_seconds",
                        "backend", "ssl", "username", "password", "log_level", "address", "x"])
trees = st.recursive(scalars, lambda children: st.one_of(st.lists(children, max_size=4),
                                                         st.dictionaries(keys, children, max_size=5)), max_leaves=25)


@settings(max_examples=300)
@given(trees)
def test_generated_yaml_gives_config_or_config_error(tree):
    try:
        parse_config(yaml.safe_dump(tree), env={})
    except ConfigError as exc:
        assert exc.problems and all(isinstance(p, str) and p for p in exc.problems)


@settings(max_examples=200)
@given(st.text(max_size=200))
def test_arbitrary_text_gives_config_or_config_error(text):
    try:
        parse_config(text, env={})
    except ConfigError as exc:
        assert exc.problems
