"""The accounts part: linked accounts, their pay calendars, records and profiles."""
