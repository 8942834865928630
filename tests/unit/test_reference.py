"""The documentation's config and metrics references are generated from the code and may not drift."""

import pytest

from cdcwatch.mixin.generate import reference_pages
from cdcwatch.reference import config_reference, metrics_reference
from tests.tools import ROOT


def section(text, name):
    start = text.index(f"<!-- {name}:start -->") + len(f"<!-- {name}:start -->\n")
    return text[start: text.index(f"<!-- {name}:end -->")]


@pytest.mark.parametrize(("name", "generate"), [("metrics-reference", metrics_reference), ("config-reference", config_reference)])
def test_docs_reference_is_current(name, generate):
    pages = [page for page in reference_pages(ROOT) if f"<!-- {name}:start -->" in page.read_text()]
    assert pages, f"no page under docs/ holds the {name}"
    for page in pages:
        assert section(page.read_text(), name) == generate(), \
            f"{page.relative_to(ROOT)}: {name} is stale: run `cdcwatch mixin generate`"
