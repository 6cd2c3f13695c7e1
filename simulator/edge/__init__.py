"""The edge: HTTP in and out (the server, the middleware, the pipeline, the routes, rendering,
the OpenAPI document, snapshots as documents)."""
