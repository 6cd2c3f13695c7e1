"""The webhooks part: the outbox, the event types, the ledger and triggers."""
