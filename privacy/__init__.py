"""Privacy rules and data-subject operations."""
