"""What a browser opens: the demo page, the docs pages and the hosted flow's script modules."""
