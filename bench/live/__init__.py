"""Live-feed benchmark: 1,000 dashboard sockets on one site, events through real Redis."""
