"""Hypothesis runs the same examples on every run and has no per-example deadline: a property test fails
for a counterexample, never because a busy machine made one example slow. HYPOTHESIS_PROFILE=explore
draws fresh random examples (and keeps failures in .hypothesis/) when hunting for new ones."""

from __future__ import annotations

import os
from collections.abc import Mapping

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("ci", deadline=None, derandomize=True, database=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("explore", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


try:
    import grafana_foundation_sdk  # noqa: F401
except ModuleNotFoundError:  # the no-extras check (scripts/check-no-extras.sh): no dashboards extra
    collect_ignore = [f"unit/{name}" for name in ("test_dashboards.py", "test_preview.py", "test_lint.py",
                                                   "test_chart_stages.py")]
    """Modules that build the dashboards as they are collected: where the extra is missing they are not collected
    (the tests of other modules that read what `mixin generate` writes carry the `dashboards` marker instead)."""


try:
    import deltalake  # noqa: F401
except ModuleNotFoundError:  # the no-extras check: no pyarrow, no Delta writer
    collect_ignore = [*globals().get("collect_ignore", []), "unit/test_delta_log.py", "unit/test_delta_collector.py"]
    """Modules that write real Delta tables to read them back (deltalake, pyarrow: the `delta` and `test` extras)."""


LONGEST_FIRST = ("test_demo.py", "test_chaos.py", "test_spark_cluster.py", "test_spark_data_loss.py",
                 "test_spark_apply.py", "test_image.py", "test_chart_stages.py", "test_connect.py",
                 "test_debezium_postgres.py", "test_observability.py", "test_replication_slots.py", "test_reconcile.py",
                 "test_mysql_binlog.py")
"""Modules handed out first, longest first (the development page's timing table), so that the longest starts at
once instead of last; the rest follow in their order. scripts/test.sh keeps xdist from reordering them
(--no-loadscope-reorder: it would hand out the modules with the most tests first)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Hand the longest modules out first; the others keep their order (a stable sort: tests never depend on it).
    A test reading what `mixin generate` writes builds the dashboards: it is marked `dashboards` (the extra)."""
    for item in items:
        if "mixin_files" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.dashboards)
    rank = {name: place for place, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


@pytest.fixture(scope="session")
def mixin_files() -> Mapping[str, str]:
    """What `cdcwatch mixin generate` writes for the default mixin config (path → content), rendered once a session
    (the chart's files when first read): several test modules check it."""
    from cdcwatch.mixin import MixinConfig, render_files

    return render_files(MixinConfig())
