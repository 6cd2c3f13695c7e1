"""The links part: processor tokens and links, and the aggregator's own API."""
