"""Debezium connector metrics over JMX."""

from cdcwatch.debezium.collector import DEBEZIUM_BEAN_METRICS, DEBEZIUM_METRICS, MBEAN_PATTERN, DebeziumCollector, bean_labels

__all__ = ["DEBEZIUM_BEAN_METRICS", "DEBEZIUM_METRICS", "MBEAN_PATTERN", "DebeziumCollector", "bean_labels"]
