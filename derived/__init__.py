"""The derived layer, above the raw families of documents/: the fold of unfolded facts
(derivation.py), the figures and session summaries it keeps (daily_figures.py; visits.py and
their journeys.py), the reports that read them (funnel_reports.py, conversion_impact.py) and the
dashboard's read models (views/, one module per page). store_setup.py adds its collections,
indexes and migrations to the store's."""
