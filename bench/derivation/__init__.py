"""Derivation benchmark: a backlog of facts folded by two worker processes at once (issue 38)."""
