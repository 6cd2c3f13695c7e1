"""The start-up load: fixtures, scenarios, the catalog and generated data, checked once."""
