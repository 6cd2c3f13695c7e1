"""The company directory: the catalog, search and a company's admin."""
