"""The exporter's configuration, read and checked against the collector registry.

`cdcwatch.config`'s models know no collector; what depends on the kinds of target is checked here, once the models
have validated the file, from `cdcwatch.collectors.COLLECTORS`:

- at least one target section is configured;
- a target's name is used once within its section;
- a target's static labels use none of the labels its own kind of target sets (`CollectorEntry.reserved_labels`:
  the exporter-wide ones, `target`, `collector`, Prometheus' `job` and `instance`, and its collector's own).

Each problem is one `ConfigError` line naming its key path, like the models' own.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from cdcwatch.collectors import COLLECTORS
from cdcwatch.config import Config, ConfigError, load_yaml_model, parse_yaml_model

__all__ = ["check_config", "load_config", "parse_config", "registry_problems"]


def registry_problems(config: Config) -> list[str]:
    """What `config` gets wrong about the kinds of target, one line per problem (none: it is good)."""
    sections = [entry.section for entry in COLLECTORS]
    if not any(getattr(config, section) for section in sections):
        return [f"(top level): nothing to scrape: configure at least one of {', '.join(sections[:-1])} or {sections[-1]}"]
    problems: list[str] = []
    for entry in COLLECTORS:
        reserved = entry.reserved_labels()
        seen: list[str] = []
        for index, target in enumerate(getattr(config, entry.section)):
            problems += [f"{entry.section}[{index}].labels: label name {name!r} is {reserved[name]}: choose another name"
                         for name in target.labels if name in reserved]
            if seen.count(target.name) == 1:
                problems.append(f"(top level): {entry.what} name {target.name!r} is used twice")
            seen.append(target.name)
    return problems


def check_config(config: Config, source: str = "<config>") -> Config:
    """`config`, once it passes the registry's checks; ConfigError (one line per problem) otherwise."""
    problems = registry_problems(config)
    if problems:
        raise ConfigError(source, problems)
    return config


def parse_config(text: str, source: str = "<config>", env: Mapping[str, str] | None = None) -> Config:
    """Parse and validate YAML text, ``${VAR}`` resolved from `env` (default: the process environment)."""
    return check_config(parse_yaml_model(text, Config, source, os.environ if env is None else env), source)


def load_config(path: str | Path, env: Mapping[str, str] | None = None) -> Config:
    """Read and validate a configuration file, ``${VAR}`` resolved from `env` (default: the process environment)."""
    return check_config(load_yaml_model(path, Config, os.environ if env is None else env), str(path))
