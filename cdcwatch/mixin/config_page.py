"""docs/mixin-configuration.md: every key of the mixin config, generated from its models like the exporter's
configuration reference."""

from __future__ import annotations

import yaml

from cdcwatch.mixin.config import MixinConfig
from cdcwatch.reference import model_reference

__all__ = ["MIXIN_DOCS_PAGES", "mixin_config_page"]


def mixin_config_page() -> str:
    example = yaml.safe_dump(MixinConfig().model_dump(mode="json"), sort_keys=False, default_flow_style=False, width=120)
    return (
        "# Mixin configuration reference\n\n"
        "The mixin config is the YAML file the rules, the inhibitions and the dashboards are generated from "
        "(`--mixin.file` of `cdcwatch alerts`, `cdcwatch mixin generate` and `cdcwatch dashboards preview`): which "
        "stages of the pipeline you run, how the series are selected, the thresholds and `for` durations, where the "
        "runbook and Grafana are. Every key, its type, its default and what it means, generated (`cdcwatch docs "
        "mixin`) from the models the file is validated with; `x.y` is key `y` inside the mapping of key `x`. Every "
        "key is optional. A file with an unknown key or a value of the wrong type exits 2, naming the key.\n\n"
        f"{model_reference(MixinConfig)}\n"
        "## Every key at once\n\n"
        "The defaults, spelled out: a real file needs only the keys it changes.\n\n"
        f"```yaml\n{example}```\n")


MIXIN_DOCS_PAGES = {"docs/mixin-configuration.md": mixin_config_page}
"""The documentation's pages generated from the mixin's models (`cdcwatch mixin generate` writes them)."""
