"""Hypothesis runs the same examples on every run and has no per-example deadline: a property test fails
for a counterexample, never because a busy machine made one example slow. HYPOTHESIS_PROFILE=explore
draws fresh random examples (and keeps failures in .hypothesis/) when hunting for new ones."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile("ci", deadline=None, derandomize=True, database=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("explore", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
