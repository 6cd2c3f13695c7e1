"""The only outbound I/O: events leave as CloudEvents over HTTP, every attempt recorded."""
