"""Whether an incoming item may be stored: the privacy rules of spec §1, decided on the server.

The rules are checked in a fixed order and the first that applies names the drop reason, which
is counted. Nothing here depends on what the loader did: a request the loader should never have
sent is still refused here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from privacy.exclusion import ExclusionRule, exclusion_for

#: What kind of item is asking; recordings have rules of their own.
ItemKind = Literal["pageview", "visitor", "interaction", "lead", "survey", "chat", "consent",
                   "error", "recording", "time_on_page", "commerce"]

RECORDING_KINDS = frozenset({"recording"})


@dataclass(frozen=True)
class CollectionContext:
    """What the gate needs to know about one incoming item."""

    kind: ItemKind
    url: str | None
    gpc: bool
    consent_granted: bool
    require_consent: bool
    recordings_enabled: bool
    exclusions: Sequence[ExclusionRule]
    visitor_restricted: bool = False
    visitor_objected: bool = False


@dataclass(frozen=True)
class GateDecision:
    """Store it, or drop it for `reason`."""

    allowed: bool
    reason: str | None = None


ALLOW = GateDecision(True)


def decide(context: CollectionContext) -> GateDecision:
    """Apply the rules in order; the first that refuses names the reason."""
    # Global Privacy Control is honoured on every site, unconditionally (rule 2).
    if context.gpc:
        return GateDecision(False, "gpc")
    # A consent record is what lifts the consent requirement, so it cannot depend on it.
    if context.require_consent and not context.consent_granted and context.kind != "consent":
        return GateDecision(False, "consent_missing")
    exclusion = exclusion_for(context.url, context.exclusions) if context.url else "none"
    if exclusion == "all":
        return GateDecision(False, "excluded_url")
    if context.visitor_restricted and context.kind != "consent":
        return GateDecision(False, "restricted")
    if context.visitor_objected and context.kind != "consent":
        return GateDecision(False, "objected")
    if context.kind in RECORDING_KINDS:
        if not context.recordings_enabled:
            return GateDecision(False, "recordings_off")
        if exclusion == "replay":
            return GateDecision(False, "excluded_from_replay")
    return ALLOW
