"""The configuration, mixin configuration and metrics references are generated from the code and may not drift; what
the configuration reference documents is what the validator accepts, and every key says what it means."""

from pathlib import Path

import pytest
import yaml

from cdcwatch.mixin.config import MixinConfig
from cdcwatch.mixin.config_page import MIXIN_DOCS_PAGES
from cdcwatch.reference import DOCS_PAGES, config_reference, example_config, model_reference
from cdcwatch.validation import config_model, load_config

ROOT = Path(__file__).resolve().parents[2]
PASSWORDS = {"PG_PASSWORD": "p", "MYSQL_PASSWORD": "m", "CONNECT_PASSWORD": "c"}


PAGES = DOCS_PAGES | MIXIN_DOCS_PAGES


@pytest.mark.parametrize("page", sorted(PAGES))
def test_docs_page_is_current(page):
    assert (ROOT / page).read_text() == PAGES[page](), f"{page} is stale: run `cdcwatch mixin generate`"


@pytest.mark.parametrize("model", [config_model(), MixinConfig], ids=["config", "mixin"])
def test_every_key_says_what_it_means(model):
    unexplained = [row.split("|")[1].strip() for row in model_reference(model).splitlines()[2:] if row.endswith("|  |")]
    assert not unexplained, f"keys without a meaning (a description or a docstring under the field): {unexplained}"


def test_a_config_in_every_documented_shape_loads(tmp_path):
    """Built from the published page's table alone (sections as the table says: a mapping, or a list of them)."""
    documented = (ROOT / "docs/configuration.md").read_text()
    example = example_config(documented)
    path = tmp_path / "every-key.yml"
    path.write_text(yaml.safe_dump(example))
    config = load_config(path, env=PASSWORDS)
    assert config.connect[0].jmx is not None and config.connect[0].jmx.port == 9011
    assert [len(getattr(config, key)) for key in ("debezium", "kafka", "connect", "postgres", "mysql", "reconcile",
                                                  "canary")] == [1] * 7


def test_every_documented_default_is_the_default(tmp_path):
    """The example spells out every documented default: loaded, it equals a config that leaves them all out."""
    example = example_config(config_reference())
    spelled_out = tmp_path / "spelled-out.yml"
    spelled_out.write_text(yaml.safe_dump(example))
    minimal = {section: [{key: value for key, value in entry.items() if key in REQUIRED[section]} for entry in entries]
               for section, entries in example.items() if isinstance(entries, list)}
    left_out = tmp_path / "left-out.yml"
    left_out.write_text(yaml.safe_dump(minimal))
    assert load_config(spelled_out, env=PASSWORDS) == load_config(left_out, env=PASSWORDS)


REQUIRED = {"debezium": {"name", "jmx"}, "kafka": {"name", "bootstrap_servers"},
            "connect": {"name", "url", "username", "password", "jmx"}, "postgres": {"name", "password"},
            "mysql": {"name", "user", "password"}, "reconcile": {"name", "source", "target", "freshness_canary"},
            "canary": {"name", "server", "interval_seconds", "source", "target"}, "delta": {"name", "uri"}}
"""Per list section: the keys the example sets that are no defaults (required, or from its example values)."""
