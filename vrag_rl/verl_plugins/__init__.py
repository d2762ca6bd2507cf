"""Thin adapters that plug the project into verl 0.9.1 through its own extension points (no fork)."""
