"""Two-factor sign-in in the dashboard API: the signed-in user's state, enrolment, recovery
codes and turning it off; an organization's requirement; and the enrolment an organization
requires at sign-in, authenticated by its second-step token (the code that finishes it answers
the token pair: handlers/auth.py)."""

from __future__ import annotations

from auth.two_factor import ENROL, Enrolment
from handlers.base import BaseHandler


def _enrolment_answer(enrolment: Enrolment) -> dict[str, str]:
    return {"secret": enrolment.secret, "otpauthUri": enrolment.uri}


class TwoFactorHandler(BaseHandler):
    """GET: whether two-factor is on, the recovery codes left, the organizations requiring it."""

    async def get(self) -> None:
        self.write_json(await self.deps.two_factor.status(self.user))


class TwoFactorSetupHandler(BaseHandler):
    """POST: a new secret, shown once, waiting for its first code."""

    async def post(self) -> None:
        self.write_json(_enrolment_answer(await self.deps.two_factor.begin(self.user.id)),
                        status=201)


class TwoFactorConfirmHandler(BaseHandler):
    """POST: the first code turns two-factor on; the recovery codes, shown once."""

    async def post(self) -> None:
        body = self.validated_body("TwoFactorCode")
        codes = await self.deps.two_factor.confirm(self.user.id, body["code"])
        self.write_json({"recoveryCodes": codes})


class TwoFactorDisableHandler(BaseHandler):
    """POST: the password and a code (or a recovery code) turn two-factor off."""

    async def post(self) -> None:
        body = self.validated_body("TwoFactorDisable")
        await self.deps.two_factor.disable(self.user, body["password"], code=body.get("code"),
                                           recovery_code=body.get("recoveryCode"))
        self.set_status(204)
        self.finish()


class RecoveryCodesHandler(BaseHandler):
    """POST: ten new recovery codes, the old ones dead; the password and a code required."""

    async def post(self) -> None:
        body = self.validated_body("RecoveryCodesRenewal")
        codes = await self.deps.two_factor.renew_recovery_codes(self.user, body["password"],
                                                                body["code"])
        self.write_json({"recoveryCodes": codes})


class OrganizationTwoFactorHandler(BaseHandler):
    """PUT: require a second factor of the organization's members, or stop (owners only)."""

    async def put(self, organization_id: str) -> None:
        self.deps.team.require_member(self.user, organization_id)
        body = self.validated_body("TwoFactorRequirement")
        await self.deps.two_factor.require(self.user, organization_id, body["required"])
        self.set_status(204)
        self.finish()


class SignInEnrolmentHandler(BaseHandler):
    """POST /auth/login/two-factor/setup: the secret of the enrolment an organization requires,
    for a second-step token of that kind."""

    authentication = "none"

    async def post(self) -> None:
        body = self.validated_body("SecondStepToken")
        claims = self.deps.two_factor.read_challenge(body["token"], ENROL)
        self.write_json(_enrolment_answer(await self.deps.two_factor.begin(claims.user_id)),
                        status=201)


default_handlers = [
    (r"/auth/two-factor", TwoFactorHandler),
    (r"/auth/two-factor/setup", TwoFactorSetupHandler),
    (r"/auth/two-factor/confirm", TwoFactorConfirmHandler),
    (r"/auth/two-factor/disable", TwoFactorDisableHandler),
    (r"/auth/two-factor/recovery-codes", RecoveryCodesHandler),
    (r"/api/v1/organizations/([0-9a-f-]{36})/two-factor", OrganizationTwoFactorHandler),
    (r"/auth/login/two-factor/setup", SignInEnrolmentHandler),
]
