"""Kafka consumer-group lag (offsets, seconds, status) and CDC freshness, collected at scrape time."""

from cdcwatch.kafka.collector import KAFKA_METRICS, KafkaCollector

__all__ = ["KAFKA_METRICS", "KafkaCollector"]
