"""Dashboard authentication: passwords, tokens, refresh-token families and login throttling."""
