"""An organization's team: invitations by e-mail, roles, removal, each change audited.

Who may do what: every member sees the team; owners and admins invite, change roles and remove
members; only an owner makes, unmakes or removes an owner; the last owner can be neither removed
nor demoted (documents/accounts.py checks it in the change's transaction). A removed member's
sessions end at once. An invitation is a single-use link valid INVITATION_LIFETIME whose token
is stored only as an HMAC (documents/account_links.py); it is mailed through SMTP_URL, or, when
no mail server is configured, handed to the inviter once to pass on.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol

from auth.passwords import PasswordHasher
from documents import account_links, accounts, audit, two_factor
from documents.accounts import ROLES, AuthenticatedUser
from documents.store import Store
from errors import Conflict, Forbidden, InvalidInput, NotFound

INVITATION_LIFETIME = timedelta(days=7)


class Mailer(Protocol):
    """What the team needs of the account mailer (tasks/account_mail.py)."""

    @property
    def configured(self) -> bool: ...

    async def send(self, *, kind: str, account_id: str | None, to: str, subject: str,
                   text: str) -> None: ...


@dataclass(frozen=True)
class IssuedInvitation:
    """A new invitation; `link` is set only when it was not mailed (shown once to the inviter)."""

    invitation: dict[str, Any]
    emailed: bool
    link: str | None


def _checked_role(role: str) -> str:
    if role not in ROLES:
        raise InvalidInput(f"role must be one of {', '.join(ROLES)}", field="role")
    return role


class Team:
    """Reads and changes organizations' teams."""

    def __init__(self, store: Store, passwords: PasswordHasher,
                 signer: account_links.LinkSigner, mailer: Mailer, public_url: str) -> None:
        self._store = store
        self._passwords = passwords
        self._signer = signer
        self._mailer = mailer
        self._public_url = public_url

    @staticmethod
    def require_member(user: AuthenticatedUser, organization_id: str) -> str:
        """The user's role in the organization; NotFound when not a member (another
        organization's team is not even known to exist)."""
        role = user.role_in(organization_id)
        if role is None:
            raise NotFound("no such organization")
        return role

    def _require_admin(self, user: AuthenticatedUser, organization_id: str) -> str:
        role = self.require_member(user, organization_id)
        if role not in accounts.ADMIN_ROLES:
            raise Forbidden("only owners and admins manage the team", code="not_admin")
        return role

    @staticmethod
    def _require_owner_for(actor_role: str, *roles: str | None) -> None:
        if "owner" in roles and actor_role != "owner":
            raise Forbidden("only an owner makes, unmakes or removes an owner",
                            code="owner_required")

    async def overview(self, user: AuthenticatedUser, organization_id: str) -> dict[str, Any]:
        """The members with role and last sign-in, and the pending invitations."""
        self.require_member(user, organization_id)
        members = await accounts.members_of_organization(self._store, organization_id)
        pending = await account_links.pending_invitations(self._store, organization_id)
        return {"members": members,
                "invitations": [account_links.invitation_view(link) for link in pending],
                "mailConfigured": self._mailer.configured}

    async def invite(self, user: AuthenticatedUser, organization_id: str, email: str,
                     role: str) -> IssuedInvitation:
        """Invite an address with a role; a pending invitation of the same address is replaced."""
        actor_role = self._require_admin(user, organization_id)
        self._require_owner_for(actor_role, _checked_role(role))
        email = accounts.normalise_email(email)
        if "@" not in email.strip("@"):
            raise InvalidInput("that is not an e-mail address", field="email")
        if await accounts.find_user_by_email(self._store, email) is not None:
            raise Conflict("this address already has an account here", code="email_taken")
        organization = await accounts.find_organization(self._store, organization_id)
        assert organization is not None  # the user is a member of it
        token = self._signer.new_token()

        async def write(session: Any) -> dict[str, Any]:
            await account_links.revoke_invitations_of(self._store, organization_id, email,
                                                      session=session)
            link = await account_links.create_link(
                self._store, kind=account_links.INVITATION,
                token_digest=self._signer.digest(token), lifetime=INVITATION_LIFETIME,
                account_id=organization["accountId"], organization_id=organization_id,
                email=email, role=role, created_by=user.id, session=session)
            await audit.record(self._store, action="team.member_invited", actor_user_id=user.id,
                               account_id=user.account_id, organization_id=organization_id,
                               details={"invitationId": link["_id"], "role": role},
                               session=session)
            return link

        link = await self._store.transaction(write)
        url = f"{self._public_url}/app/invite#{token}"
        if not self._mailer.configured:
            return IssuedInvitation(account_links.invitation_view(link), False, url)
        await self._mailer.send(
            kind=account_links.INVITATION, account_id=organization["accountId"], to=email,
            subject=f"You are invited to {organization['name']} on Visitor Service",
            text=(f"{user.email} invited you to join {organization['name']} on Visitor "
                  f"Service as {role}.\n\nTo accept, open this link and choose a password "
                  f"(it works once, within {INVITATION_LIFETIME.days} days):\n\n{url}\n\n"
                  "If you did not expect this, ignore this mail.\n"))
        return IssuedInvitation(account_links.invitation_view(link), True, None)

    async def invitation(self, token: str) -> dict[str, Any]:
        """What a live invitation offers (address, organization, role); NotFound otherwise."""
        link = await account_links.find_live_link(self._store, account_links.INVITATION,
                                                  self._signer.digest(token))
        if link is None:
            raise NotFound("this invitation is unknown, used or expired", code="invalid_link")
        organization = await accounts.find_organization(self._store, link["organizationId"])
        return {"email": link["email"], "role": link["role"],
                "organizationName": organization["name"] if organization else None,
                "expiresAt": link["expiresAt"]}

    async def accept(self, token: str, password: str, display_name: str | None) -> str:
        """Create the invited member with that password; returns the new user's id. NotFound
        for an unknown, used, revoked or expired link, which stays unused if this fails."""
        password_hash = await self._passwords.hash(password)  # the strength rule, before use

        async def write(session: Any) -> str:
            link = await account_links.use_link(self._store, account_links.INVITATION,
                                                self._signer.digest(token), session=session)
            if link is None:
                raise NotFound("this invitation is unknown, used or expired",
                               code="invalid_link")
            user_id = await accounts.add_invited_member(
                self._store, account_id=link["accountId"],
                organization_id=link["organizationId"], email=link["email"],
                password_hash=password_hash, display_name=display_name or link["email"],
                role=link["role"], session=session)
            await audit.record(self._store, action="team.invitation_accepted",
                               actor_user_id=user_id, account_id=link["accountId"],
                               organization_id=link["organizationId"],
                               details={"invitationId": link["_id"], "role": link["role"],
                                        "invitedBy": link["createdBy"]},
                               session=session)
            return user_id

        return await self._store.transaction(write)

    async def revoke_invitation(self, user: AuthenticatedUser, organization_id: str,
                                invitation_id: str) -> None:
        """Revoke a pending invitation; its link stops working."""
        self._require_admin(user, organization_id)

        async def write(session: Any) -> None:
            revoked = await account_links.revoke_invitation(self._store, organization_id,
                                                            invitation_id, session=session)
            if revoked is None:
                raise NotFound("no such pending invitation")
            await audit.record(self._store, action="team.invitation_revoked",
                               actor_user_id=user.id, account_id=user.account_id,
                               organization_id=organization_id,
                               details={"invitationId": invitation_id}, session=session)

        await self._store.transaction(write)

    async def change_role(self, user: AuthenticatedUser, organization_id: str, member_id: str,
                          role: str) -> None:
        """Give a member another role; Conflict when that would leave no owner."""
        actor_role = self._require_admin(user, organization_id)
        _checked_role(role)
        current = await accounts.find_membership(self._store, organization_id, member_id)
        if current is None:
            raise NotFound("no such member")
        self._require_owner_for(actor_role, role, current["role"])

        async def write(session: Any) -> None:
            before = await accounts.set_member_role(self._store, organization_id, member_id,
                                                    role, session=session)
            if before is None:
                raise NotFound("no such member")
            if before != role:
                await audit.record(self._store, action="team.role_changed",
                                   actor_user_id=user.id, account_id=user.account_id,
                                   organization_id=organization_id,
                                   details={"userId": member_id, "from": before, "to": role},
                                   session=session)

        await self._store.transaction(write)

    async def remove(self, user: AuthenticatedUser, organization_id: str, member_id: str
                     ) -> None:
        """Remove a member and end their sessions at once; Conflict for the last owner."""
        actor_role = self._require_admin(user, organization_id)
        current = await accounts.find_membership(self._store, organization_id, member_id)
        if current is None:
            raise NotFound("no such member")
        self._require_owner_for(actor_role, current["role"])

        async def write(session: Any) -> None:
            role = await accounts.remove_member(self._store, organization_id, member_id,
                                                session=session)
            if role is None:
                raise NotFound("no such member")
            await audit.record(self._store, action="team.member_removed",
                               actor_user_id=user.id, account_id=user.account_id,
                               organization_id=organization_id,
                               details={"userId": member_id, "role": role}, session=session)

        await self._store.transaction(write)
        await accounts.revoke_user_sessions(self._store, member_id, "member_removed")
        if await accounts.find_user(self._store, member_id) is None:
            # A user left in no organization is gone, and their second factor with them.
            await two_factor.remove(self._store, member_id)
