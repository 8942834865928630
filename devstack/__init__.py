"""Local components for the demo and the integration tests: real servers on 127.0.0.1."""
