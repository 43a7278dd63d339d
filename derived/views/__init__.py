"""The dashboard's read models: what each page shows, read through the collection families in
documents/, one module per page (paging holds what every list shares, charts the days a range
covers).

They shape records for display and span families; none names a collection itself
(tests/documents/test_collection_owners.py): the reads of one collection are its family's, and
the generic list and export helpers take a family's constant. Restricted visitors (GDPR Art. 18)
are left out of every dashboard read here; data-subject operations read them through privacy/
instead.
"""
