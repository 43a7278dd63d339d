"""Finding a data subject by e-mail address, for the shop's own privacy tools.

WordPress's Tools → Export / Erase Personal Data name a person by e-mail address, while the
service knows visitors by a random id. The visitors of that person are those whose leads carry
the address, whose profile lists it, and the profiles linked to those (same CMS user id on other
browsers). Each of them is then exported or erased exactly as the dashboard does it.
"""

from __future__ import annotations

from documents import leads, visitors
from documents.store import Store


def normalised_email(email: str) -> str:
    """The address as ingest stores it (trimmed, lower case)."""
    return email.strip().lower()


async def visitors_with_email(store: Store, site_id: str, email: str) -> list[str]:
    """The ids of the site's visitors held for this address, with their linked profiles."""
    address = normalised_email(email)
    found: set[str] = set()
    for family in (leads, visitors):
        values = await family.visitors_with_email(store, site_id, address)
        found |= {value for value in values if isinstance(value, str) and value}
    if not found:
        return []
    linked = await visitors.same_user_visitor_ids(store, site_id, sorted(found))
    found |= {value for value in linked if isinstance(value, str) and value}
    return sorted(found)
