"""Debezium connector metrics over JMX."""

from cdcwatch.debezium.collector import MBEAN_PATTERN, DebeziumCollector, bean_labels

__all__ = ["MBEAN_PATTERN", "DebeziumCollector", "bean_labels"]
