"""Kafka Connect workers: connector and task states (REST) and worker MBeans (JMX)."""

from cdcwatch.connect.collector import CONNECT_JMX_METRICS, CONNECT_METRICS, ConnectCollector

__all__ = ["CONNECT_JMX_METRICS", "CONNECT_METRICS", "ConnectCollector"]
