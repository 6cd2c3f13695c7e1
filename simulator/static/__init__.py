"""Files the client SDK serves: the script, the hosted flow page, its script and style."""
