"""An organization's team in the dashboard API: members, invitations, roles, removal; and the
public side of an invitation (what it offers; accepting it signs in: handlers/auth.py)."""

from __future__ import annotations

from handlers.base import BaseHandler


class TeamHandler(BaseHandler):
    """GET: the members with role and last sign-in, and the pending invitations."""

    async def get(self, organization_id: str) -> None:
        self.write_json(await self.deps.team.overview(self.user, organization_id))


class InvitationsHandler(BaseHandler):
    """POST invites an e-mail address with a role."""

    async def post(self, organization_id: str) -> None:
        self.deps.team.require_member(self.user, organization_id)
        body = self.validated_body("InvitationCreate")
        issued = await self.deps.team.invite(self.user, organization_id, body["email"],
                                             body["role"])
        answer = {"invitation": issued.invitation, "emailed": issued.emailed}
        if issued.link is not None:
            answer["link"] = issued.link
        self.write_json(answer, status=201)


class InvitationHandler(BaseHandler):
    """DELETE revokes a pending invitation."""

    async def delete(self, organization_id: str, invitation_id: str) -> None:
        await self.deps.team.revoke_invitation(self.user, organization_id, invitation_id)
        self.set_status(204)
        self.finish()


class MemberHandler(BaseHandler):
    """PATCH changes a member's role; DELETE removes the member and ends their sessions."""

    async def patch(self, organization_id: str, user_id: str) -> None:
        self.deps.team.require_member(self.user, organization_id)
        body = self.validated_body("MemberUpdate")
        await self.deps.team.change_role(self.user, organization_id, user_id, body["role"])
        self.set_status(204)
        self.finish()

    async def delete(self, organization_id: str, user_id: str) -> None:
        await self.deps.team.remove(self.user, organization_id, user_id)
        self.set_status(204)
        self.finish()


class MemberPasswordResetHandler(BaseHandler):
    """POST: a password reset link for a member (owners only), mailed when a mail server is
    set, else in the answer once for the owner to pass on."""

    async def post(self, organization_id: str, user_id: str) -> None:
        issued = await self.deps.recovery.reset_for_member(self.user, organization_id, user_id)
        answer = {"emailed": issued.emailed, "expiresAt": issued.expires_at}
        if issued.link is not None:
            answer["link"] = issued.link
        self.write_json(answer, status=201)


class InvitationDetailsHandler(BaseHandler):
    """POST /auth/invitations/details: what an invitation's token offers, for its page. The
    token travels in the body, never in a URL that a log would keep."""

    authentication = "none"

    async def post(self) -> None:
        body = self.validated_body("InvitationToken")
        self.write_json(await self.deps.team.invitation(body["token"]))


default_handlers = [
    (r"/api/v1/organizations/([0-9a-f-]{36})/team", TeamHandler),
    (r"/api/v1/organizations/([0-9a-f-]{36})/invitations", InvitationsHandler),
    (r"/api/v1/organizations/([0-9a-f-]{36})/invitations/([0-9a-f-]{36})", InvitationHandler),
    (r"/api/v1/organizations/([0-9a-f-]{36})/members/([0-9a-f-]{36})", MemberHandler),
    (r"/api/v1/organizations/([0-9a-f-]{36})/members/([0-9a-f-]{36})/password-reset",
     MemberPasswordResetHandler),
    (r"/auth/invitations/details", InvitationDetailsHandler),
]
