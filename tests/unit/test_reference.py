"""The README's config and metrics references are generated from the code and may not drift."""

from pathlib import Path

from cdcwatch.reference import config_reference, metrics_reference

README = Path(__file__).resolve().parents[2] / "README.md"


def section(text, name):
    start = text.index(f"<!-- {name}:start -->") + len(f"<!-- {name}:start -->\n")
    return text[start: text.index(f"<!-- {name}:end -->")]


def test_readme_metrics_reference_is_current():
    assert section(README.read_text(), "metrics-reference") == metrics_reference(), \
        "README metrics reference is stale: run `cdcwatch mixin generate`"


def test_readme_config_reference_is_current():
    assert section(README.read_text(), "config-reference") == config_reference(), \
        "README config reference is stale: run `cdcwatch mixin generate`"
