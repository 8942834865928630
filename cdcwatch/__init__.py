"""cdcwatch: a Prometheus exporter for change-data-capture pipelines."""

__version__ = "0.1.0"
__all__ = ["__version__"]
