"""Live dashboard events: the bus port, the hub of connections, the WebSocket handler."""
