"""The tasks part: tasks, their scenarios' states and the pay-link state."""
