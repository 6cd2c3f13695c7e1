"""The customer kit: the test clients, webhook receivers and the pytest plugin."""
