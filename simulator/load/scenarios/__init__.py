"""Scenarios: timeline scripts of task steps, loaded from YAML and run on the clock."""
