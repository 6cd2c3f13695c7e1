"""The operator tools: the CLI, verify-against, listen, exec."""
