"""Real Java values of every type a Debezium MBean attribute can hold, through the JPype backend's
conversion (`to_python`) and the mapping (`convert`), under every attribute name the mapping knows:
never an exception, never a NaN, infinite or negative sample, and numbers taken only from numbers.

The values are Java objects built in an in-process JVM (the one the JPype backend uses), so what
is tested is what a scrape receives, not a Python imitation of it.
"""

from __future__ import annotations

import math

import jpype
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdcwatch.debezium.mapping import RULES, Conversion, convert
from cdcwatch.jmx.jpype_client import to_python
from cdcwatch.jmx.jvm import ensure_jvm

ATTRIBUTES = sorted({rule.attribute for rule in RULES})
FROM_TEXT = {rule.attribute for rule in RULES if rule.conversion in (Conversion.NUMERIC_TEXT, Conversion.FILE_INDEX)}
"""Attributes whose number is carried as text (Oracle SCNs, binlog file names)."""


@pytest.fixture(scope="module", autouse=True)
def jvm() -> None:
    ensure_jvm()


def _tabular(entries: dict[str, int]) -> object:
    """A TabularData map of String -> Long, as RowsScanned arrives over JMX."""
    open_type = jpype.JPackage("javax.management.openmbean")
    row_type = open_type.CompositeType("row", "row", ["key", "value"], ["key", "value"],
                                       [open_type.SimpleType.STRING, open_type.SimpleType.LONG])
    table = open_type.TabularDataSupport(open_type.TabularType("map", "map", row_type, ["key"]))
    for key, count in entries.items():
        table.put(open_type.CompositeDataSupport(row_type, ["key", "value"], [key, jpype.JLong(count)]))
    return table


def _java_values() -> list[object]:
    lang, util, math_ = jpype.JPackage("java.lang"), jpype.JPackage("java.util"), jpype.JPackage("java.math")
    hash_map = util.HashMap()
    hash_map.put("public.t", lang.Long(7))
    hash_map.put("", lang.String("x"))
    array_list = util.ArrayList()
    array_list.add(lang.String("public.a"))
    array_list.add(None)
    return [
        None, lang.Boolean(True), lang.Boolean(False), lang.Byte(-1), lang.Short(3), lang.Integer(-1), lang.Integer(2**31 - 1),
        lang.Long(-1), lang.Long(0), lang.Long(2**63 - 1), lang.Long(-(2**63)), lang.Double(lang.Double.NaN),
        lang.Double(lang.Double.POSITIVE_INFINITY), lang.Double(lang.Double.NEGATIVE_INFINITY), lang.Double(-0.0),
        lang.Float(1.5), lang.Double(1e300), math_.BigInteger("340282366920938463463374607431768211456"),
        math_.BigDecimal("12.50"), lang.String(""), lang.String("12"), lang.String("RUNNING"), lang.Character("x"),
        jpype.JArray(jpype.JString)(["public.a", "public.b"]), jpype.JArray(jpype.JLong)([1, -1]),
        jpype.JArray(jpype.JInt)([]), hash_map, array_list, _tabular({"public.t": 5, "public.u": -1}), _tabular({}),
        util.Date(0), lang.Thread.State.RUNNABLE, jpype.JPackage("javax.management").ObjectName("debezium.postgres:type=x"),
        util.concurrent.atomic.AtomicLong(9),
    ]


def _check(attribute: str, java_value: object) -> None:
    python_value = to_python(java_value)
    for sample in convert({attribute: python_value}):
        assert math.isfinite(sample.value) and sample.value >= 0, (attribute, java_value, sample)
        assert all(isinstance(v, str) for _, v in sample.labels), (attribute, java_value, sample)
        if sample.value not in (0.0, 1.0) and not isinstance(python_value, (int, float, dict, list)) \
                and attribute not in FROM_TEXT:
            raise AssertionError(f"{attribute}: a number {sample.value} from the non-number {java_value!r}")


def test_every_java_type_under_every_attribute() -> None:
    values = _java_values()
    for attribute in ATTRIBUTES:
        for java_value in values:
            _check(attribute, java_value)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(ATTRIBUTES),
       st.one_of(st.integers(-(2**63), 2**63 - 1).map(lambda n: jpype.JPackage("java.lang").Long(n)),
                 st.floats().map(lambda f: jpype.JPackage("java.lang").Double(f)),
                 st.dictionaries(st.text(max_size=20), st.integers(-(2**63), 2**63 - 1), max_size=5).map(_tabular),
                 st.text(max_size=40).map(lambda s: jpype.JPackage("java.lang").String(s))))
def test_random_java_values(attribute: str, java_value: object) -> None:
    _check(attribute, java_value)
