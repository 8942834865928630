"""The exporter's configuration, read and checked against the collector registry.

`cdcwatch.config`'s models know no collector. Here the registry (`cdcwatch.collectors.COLLECTORS`) adds a section
per kind of target to the file's model (`config_model`), and checks what depends on the kinds, once the models have
validated the file:

- at least one target section is configured;
- a target's name is used once within its section;
- a target's static labels use none of the labels its own kind of target sets (`CollectorEntry.reserved_labels`:
  the exporter-wide ones, `target`, `collector`, Prometheus' `job` and `instance`, and its collector's own);
- what only the kind's library can tell of a target's settings (`CollectorEntry.problems`: a Kafka client setting
  librdkafka refuses).

Each problem is one `ConfigError` line naming its key path, like the models' own.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, create_model

from cdcwatch.collectors import COLLECTORS, Registry
from cdcwatch.config import Config, ConfigError, literal_secrets, load_yaml_model, parse_yaml_model

__all__ = ["check_config", "config_model", "literal_secret_warnings", "load_config", "parse_config", "registry_problems"]

@cache
def config_model(registry: Registry = COLLECTORS) -> type[Config]:
    """The configuration file's model: `Config`'s own keys, then one section (a list of targets) per kind."""
    sections: dict[str, Any] = {entry.section: (list[entry.model], Field(default_factory=list, description=entry.summary))  # type: ignore[name-defined]
                                for entry in registry}
    model: type[Config] = create_model("Config", __base__=Config, __module__=Config.__module__, **sections)
    model.__doc__ = "The whole configuration file: the exporter's own keys, then a section per kind of target."
    return model


def registry_problems(config: Config, registry: Registry = COLLECTORS) -> list[str]:
    """What `config` gets wrong about the kinds of target, one line per problem (none: it is good)."""
    sections = [entry.section for entry in registry]
    if not any(config.targets(section) for section in sections):
        return [f"(top level): nothing to scrape: configure at least one of {', '.join(sections[:-1])} or {sections[-1]}"]
    problems: list[str] = []
    for entry in registry:
        reserved = entry.reserved_labels()
        seen: list[str] = []
        for index, target in enumerate(config.targets(entry.section)):
            problems += [f"{entry.section}[{index}].labels: label name {name!r} is {reserved[name]}: choose another name"
                         for name in target.labels if name in reserved]
            problems += [f"{entry.section}[{index}].{problem}" for problem in entry.problems(target)]
            if seen.count(target.name) == 1:
                problems.append(f"(top level): {entry.what} name {target.name!r} is used twice")
            seen.append(target.name)
    return problems


def check_config(config: Config, source: str = "<config>", registry: Registry = COLLECTORS) -> Config:
    """`config`, once it passes the registry's checks; ConfigError (one line per problem) otherwise."""
    problems = registry_problems(config, registry)
    if problems:
        raise ConfigError(source, problems)
    return config


def parse_config(text: str, source: str = "<config>", env: Mapping[str, str] | None = None,
                 registry: Registry = COLLECTORS) -> Config:
    """Parse and validate YAML text, ``${VAR}`` resolved from `env` (default: the process environment)."""
    model = config_model(registry)
    return check_config(parse_yaml_model(text, model, source, os.environ if env is None else env), source, registry)


def load_config(path: str | Path, env: Mapping[str, str] | None = None) -> Config:
    """Read and validate a configuration file, ``${VAR}`` resolved from `env` (default: the process environment)."""
    return check_config(load_yaml_model(path, config_model(), os.environ if env is None else env), str(path))


def literal_secret_warnings(path: str | Path) -> list[str]:
    """For a configuration file `load_config` accepted: one warning per secret written in it as a literal, with the
    fix (the configuration page's rule: a secret is `${VAR}`, never the secret itself)."""
    raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    return [f"{path}: {where} holds the secret itself, readable by whoever reads the file: write ${{VAR}} there and "
            "set VAR in the exporter's environment (in Kubernetes from a Secret: the chart's secretEnv)"
            for where in literal_secrets(raw)]
