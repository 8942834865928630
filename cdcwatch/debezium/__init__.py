"""Debezium connector metrics over JMX."""

from cdcwatch.debezium.collector import DEBEZIUM_METRICS, MBEAN_PATTERN, DebeziumCollector, bean_labels

__all__ = ["DEBEZIUM_METRICS", "MBEAN_PATTERN", "DebeziumCollector", "bean_labels"]
