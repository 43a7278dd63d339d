"""What a tracker costs a shop's page, beside Sentry's and PostHog's session replay (issue 28
point 18); `python -m bench.page_cost`."""
