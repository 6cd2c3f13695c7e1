"""The hosted flow's steps and words."""
