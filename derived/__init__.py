"""The derived layer: figures folded off the request path and the dashboard's read models."""
