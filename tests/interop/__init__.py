"""Interoperability runs against third-party test suites (see docs/conformance.md)."""
