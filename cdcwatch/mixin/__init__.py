"""Alert rules, Alertmanager inhibitions and Grafana dashboards, generated from one configuration (`MixinConfig`)."""

from cdcwatch.mixin.config import MixinConfig, load_mixin_config
from cdcwatch.mixin.generate import INHIBIT_FILE, RULES_FILE, RULES_TEST_FILE, render_files, write_files

__all__ = ["INHIBIT_FILE", "RULES_FILE", "RULES_TEST_FILE", "MixinConfig", "load_mixin_config", "render_files", "write_files"]
