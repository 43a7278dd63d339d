"""Dashboard sign-in: login (with a second factor when one is on or required), refresh-token
rotation, logout, who am I, and passwords changed or reset, and an invitation accepted.

The refresh token is returned in the body (API clients) and set as an HttpOnly, Secure,
SameSite=Strict cookie scoped to /auth (the dashboard, whose scripts never see it). Refresh and
logout take it from the body or from that cookie.
"""

from __future__ import annotations

from typing import Any

from auth.service import CheckedPassword, TokenPair
from auth.two_factor import CODE, ENROL
from documents import accounts, audit
from errors import Unauthenticated
from handlers.base import BaseHandler
from privacy.account_export import account_export

REFRESH_COOKIE = "svc_refresh"


class TokenPairHandler(BaseHandler):
    """Shared by the handlers that hand out a token pair."""

    authentication = "none"

    def send_pair(self, pair: TokenPair, extra: dict[str, Any] | None = None) -> None:
        """Answer with the pair (and `extra`) and set the refresh cookie."""
        self.set_cookie(
            REFRESH_COOKIE, pair.refresh_token, path="/auth", httponly=True, secure=True,
            samesite="Strict", expires=pair.refresh_expires_at,
        )
        self.write_json({
            "accessToken": pair.access_token,
            "accessTokenExpiresAt": pair.access_expires_at,
            "refreshToken": pair.refresh_token,
            "refreshTokenExpiresAt": pair.refresh_expires_at,
            "tokenType": "Bearer",
            **(extra or {}),
        })

    async def sign_in(self, checked: CheckedPassword) -> None:
        """The token pair, or, when a second factor is needed (a code, or an enrolment an
        organization requires), a short-lived second-step token instead of a session."""
        kind = await self.deps.two_factor.second_step_for(checked.user_id)
        if kind is not None:
            step = self.deps.two_factor.challenge(checked.user_id, kind, checked.network_hash)
            self.write_json({"secondStep": step.kind, "secondStepToken": step.token,
                             "expiresAt": step.expires_at})
            return
        pair = await self.deps.auth.complete_login(checked)
        await self.audit_sign_in(pair.user_id)
        self.send_pair(pair)

    async def audit_sign_in(self, user_id: str) -> None:
        """Audit a completed sign-in."""
        user = await accounts.load_authenticated_user(self.deps.store, user_id, "")
        await audit.record(
            self.deps.store, action="auth.login", actor_user_id=user_id,
            account_id=user.account_id if user else None, organization_id=None,
        )

    def presented_refresh_token(self) -> str:
        """The refresh token from the body, else from the cookie."""
        body: dict[str, Any] = {}
        if self.body:
            body = self.validated_body("RefreshRequest")
        token = body.get("refreshToken") or self.get_cookie(REFRESH_COOKIE)
        if not token:
            raise Unauthenticated("a refresh token is required", code="missing_token")
        return token


class LoginHandler(TokenPairHandler):
    """POST /auth/login: e-mail and password for an access token and a refresh token."""

    async def post(self) -> None:
        body = self.validated_body("LoginRequest")
        await self.sign_in(await self.deps.auth.check_credentials(
            body["email"], body["password"], self.client_ip))


class SecondStepHandler(TokenPairHandler):
    """POST /auth/login/two-factor: the second-step token with a code or a recovery code for
    the token pair."""

    async def post(self) -> None:
        body = self.validated_body("SecondStepCode")
        claims = self.deps.two_factor.read_challenge(body["token"], CODE)
        await self.deps.two_factor.verify(claims.user_id, code=body.get("code"),
                                          recovery_code=body.get("recoveryCode"))
        pair = await self.deps.auth.complete_login(
            CheckedPassword(claims.user_id, claims.network_hash))
        await self.audit_sign_in(pair.user_id)
        self.send_pair(pair)


class SecondStepEnrolmentHandler(TokenPairHandler):
    """POST /auth/login/two-factor/confirm: the first code of an enrolment an organization
    required at sign-in, for the token pair and the recovery codes (shown once)."""

    async def post(self) -> None:
        body = self.validated_body("SecondStepEnrolment")
        claims = self.deps.two_factor.read_challenge(body["token"], ENROL)
        codes = await self.deps.two_factor.confirm(claims.user_id, body["code"])
        pair = await self.deps.auth.complete_login(
            CheckedPassword(claims.user_id, claims.network_hash))
        await self.audit_sign_in(pair.user_id)
        self.send_pair(pair, {"recoveryCodes": codes})


class RefreshHandler(TokenPairHandler):
    """POST /auth/refresh: rotate the refresh token."""

    async def post(self) -> None:
        self.send_pair(await self.deps.auth.refresh(self.presented_refresh_token()))


class LogoutHandler(TokenPairHandler):
    """POST /auth/logout: revoke the refresh token's family, its access tokens with it."""

    async def post(self) -> None:
        await self.deps.auth.logout(self.presented_refresh_token())
        self.clear_cookie(REFRESH_COOKIE, path="/auth")
        self.set_status(204)
        self.finish()


class PasswordChangeHandler(BaseHandler):
    """POST /auth/password: a new password, the current one required; other sessions end."""

    async def post(self) -> None:
        body = self.validated_body("PasswordChange")
        await self.deps.recovery.change(self.user, body["currentPassword"], body["newPassword"])
        self.set_status(204)
        self.finish()


class PasswordResetRequestHandler(BaseHandler):
    """POST /auth/password-reset/request: mail a reset link; the same answer for any address."""

    authentication = "none"

    async def post(self) -> None:
        body = self.validated_body("PasswordResetRequest")
        await self.deps.recovery.request_reset(body["email"], self.client_ip)
        self.write_json({"message": "If the address has an account and this service sends "
                                    "mail, a reset link is on its way; it works once, within "
                                    "30 minutes. Otherwise ask an owner of your organization."},
                        status=202)


class PasswordResetHandler(BaseHandler):
    """POST /auth/password-reset/confirm: a new password with a reset link's token."""

    authentication = "none"

    async def post(self) -> None:
        body = self.validated_body("PasswordReset")
        await self.deps.recovery.reset(body["token"], body["password"])
        self.set_status(204)
        self.finish()


class AccountExportHandler(BaseHandler):
    """GET /auth/me/export.json: the account export, secrets left out or redacted."""

    async def get(self) -> None:
        export = await account_export(self.deps.store, self.user)
        await audit.record(self.deps.store, action="account.exported", actor_user_id=self.user.id,
                           account_id=self.user.account_id, organization_id=None)
        self.set_header("Content-Disposition", 'attachment; filename="account-export.json"')
        self.write_json(export)


class MeHandler(BaseHandler):
    """GET /auth/me: the signed-in user and their organizations."""

    async def get(self) -> None:
        self.write_json(await accounts.describe_user(self.deps.store, self.user))


class InvitationAcceptHandler(TokenPairHandler):
    """POST /auth/invitations/accept: set a password, join, and get signed in."""

    async def post(self) -> None:
        body = self.validated_body("InvitationAccept")
        user_id = await self.deps.team.accept(body["token"], body["password"],
                                              body.get("displayName"))
        # An organization that requires a second factor gets the enrolment first.
        if await self.deps.two_factor.second_step_for(user_id) is not None:
            step = self.deps.two_factor.challenge(user_id, ENROL, None)
            self.write_json({"secondStep": step.kind, "secondStepToken": step.token,
                             "expiresAt": step.expires_at})
            return
        self.send_pair(await self.deps.auth.sign_in(user_id))


default_handlers = [
    (r"/auth/login", LoginHandler),
    (r"/auth/login/two-factor", SecondStepHandler),
    (r"/auth/login/two-factor/confirm", SecondStepEnrolmentHandler),
    (r"/auth/refresh", RefreshHandler),
    (r"/auth/logout", LogoutHandler),
    (r"/auth/me", MeHandler),
    (r"/auth/me/export\.json", AccountExportHandler),
    (r"/auth/password", PasswordChangeHandler),
    (r"/auth/password-reset/request", PasswordResetRequestHandler),
    (r"/auth/password-reset/confirm", PasswordResetHandler),
    (r"/auth/invitations/accept", InvitationAcceptHandler),
]
