"""Fitted performance-model versions: fit, list, activate, roll back; and the expectation provider."""
