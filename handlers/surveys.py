"""Surveys in the dashboard API: definitions (owners and admins change them, members read),
results, and a CSV of the answers. What a visitor sees is in sdk/src/survey.js; the loader gets
the active surveys with its site settings (handlers/sdk.py)."""

from __future__ import annotations

from documents import surveys
from handlers.site_api import SITE_ID, UUID, CsvStreamHandler, SiteDataHandler
from privacy.exclusion import validate_pattern


class SurveysHandler(SiteDataHandler):
    """GET lists the site's surveys; POST creates one (owner or admin)."""

    async def get(self, site_id: str) -> None:
        site = await self.readable_site(site_id)
        self.write_json(await surveys.list_surveys(self.deps.store, site["_id"]))

    async def post(self, site_id: str) -> None:
        site = await self.admin_site(site_id)
        body = self.validated_body("SurveyCreate")

        survey = await self.audited(
            site, "survey.created",
            lambda session: surveys.create_survey(self.deps.store, site["_id"], body,
                                                  validate_pattern, session=session),
            lambda created: {"surveyId": created["_id"]})
        self.write_json(surveys.view(survey), status=201)


class SurveyHandler(SiteDataHandler):
    """GET reads one survey; PATCH changes it, DELETE removes it (owner or admin)."""

    async def get(self, site_id: str, survey_id: str) -> None:
        site = await self.readable_site(site_id)
        survey = await surveys.find_survey(self.deps.store, site["_id"], survey_id)
        self.write_json(surveys.view(survey))

    async def patch(self, site_id: str, survey_id: str) -> None:
        site = await self.admin_site(site_id)
        body = self.validated_body("SurveyUpdate")

        survey, _ = await self.audited(
            site, "survey.changed",
            lambda session: surveys.update_survey(self.deps.store, site["_id"], survey_id, body,
                                                  validate_pattern, session=session),
            lambda updated: {"surveyId": survey_id, "fields": updated[1]} if updated[1] else None)
        self.write_json(surveys.view(survey))

    async def delete(self, site_id: str, survey_id: str) -> None:
        site = await self.admin_site(site_id)

        await self.audited(
            site, "survey.deleted",
            lambda session: surveys.delete_survey(self.deps.store, site["_id"], survey_id,
                                                  session=session),
            lambda _: {"surveyId": survey_id})
        self.set_status(204)
        self.finish()


class SurveyResultsHandler(SiteDataHandler):
    """GET .../surveys/{surveyId}/results: distribution, NPS and the newest free-text answers."""

    async def get(self, site_id: str, survey_id: str) -> None:
        site = await self.readable_site(site_id)
        self.write_json(await surveys.survey_results(self.deps.store, site["_id"],
                                                                survey_id))


class SurveyAnswersCsvHandler(CsvStreamHandler):
    """GET .../surveys/{surveyId}/answers.csv: every answer, formula-safe (owner or admin)."""

    async def get(self, site_id: str, survey_id: str) -> None:
        site = await self.admin_site(site_id)
        cap = self.deps.settings.csv_row_cap
        counted = await surveys.count_answer_rows(self.deps.store, site["_id"], survey_id,
                                                  up_to=cap + 1)
        written, truncated = await self.stream_csv(
            f"survey-{survey_id}.csv", surveys.CSV_COLUMNS, counted,
            surveys.answer_rows(self.deps.store, site["_id"], survey_id, limit=cap + 1))
        await self.audit("site.csv_exported", site, {"kind": "survey-answers", "rows": written,
                                                     "truncated": truncated,
                                                     "surveyId": survey_id})
        self.finish()


default_handlers = [
    (rf"/api/v1/sites/{SITE_ID}/surveys", SurveysHandler),
    (rf"/api/v1/sites/{SITE_ID}/surveys/{UUID}", SurveyHandler),
    (rf"/api/v1/sites/{SITE_ID}/surveys/{UUID}/results", SurveyResultsHandler),
    (rf"/api/v1/sites/{SITE_ID}/surveys/{UUID}/answers\.csv", SurveyAnswersCsvHandler),
]
