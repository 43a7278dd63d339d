"""The errors-ingest queue (Celery or in-process), error processing and notifications."""
