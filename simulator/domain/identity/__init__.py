"""The identity part: users and their public tokens, and a user's removal."""
