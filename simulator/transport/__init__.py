"""The only outbound I/O: events leave as CloudEvents over HTTP, every attempt recorded."""

# Wall seconds attempts in flight get to finish at shutdown, unless --shutdown-grace says
# (here, not in the dispatcher: the settings read it without loading the transport).
SHUTDOWN_GRACE = 5.0
