"""The FastAPI router of the Skill Court tab, mounted by Hermes' dashboard at
``/api/plugins/skill-court/`` (README "The Skill Court tab in Hermes' dashboard").

Hermes imports the plugin's ``plugin_api.py`` (laid by ``skill-court hermes
install``), which takes ``router`` from here.  The dashboard's own middleware
asks for its session token on every ``/api/`` path; but ``GET /`` hands that token
to any local user, so every route that changes something also needs the profile
owner's secret (:mod:`.secret`: the ``X-Skill-Court-Secret`` header, the line in
the 0600 file ``plugin-data/skill-court/dashboard.secret``), refused with 403 and
how to get it when missing or wrong.  Reads need the session token only.

Routes (every parameter validated: unknown fields, empty or over-long names,
control characters and non-positive ids are refused with 422 before anything
is read):

- ``GET state``: everything the tab shows (:func:`court.court_state`); reads only.
- ``GET report?trial=ID``: the trial's report page (the ``--skill-court-html``
  page, from the store) as ``{"html": ...}``; reads only.
- ``POST unlock``: whether the secret sent is right (the tab checks a pasted one); changes nothing.
- ``POST quarantine {"skill", "model"}``: ``skill-court quarantine``.
- ``POST release {"skill", "model"}``: ``skill-court release --model``.
- ``POST appeals/{id}/apply {"file"}``: ``skill-court appeal apply --appeal ID``,
  only for the newest appeal of its skill and model and only over the file the
  dialog named.

A refusal answers ``{"detail": reason}`` with 400 (a bad value), 403 (no or a wrong
secret, or a secret file that cannot be trusted), 404 (nothing
matched) or 409 (the state forbids it: an unreadable quarantine file, a
superseded appeal, a changed SKILL.md).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi import Path as PathParam
from pydantic import BaseModel, ConfigDict, Field

from pytest_skillcourt.core.layout import active_hermes_quarantine as quarantine_file
from pytest_skillcourt.core.layout import default_hermes_home, hermes_layout
from pytest_skillcourt.core.store import Store, StoreError
from pytest_skillcourt.hermes.dashboard import court
from pytest_skillcourt.core import dashboard_secret as secret

#: What a skill or model name may be: 1 to 200 characters, no control characters.
NAME_PATTERN = r"^[^\x00-\x1f\x7f]{1,200}$"
#: A trial id as ``clock.new_trial_id`` makes them (and merge's), letters, digits, ``-_.:``.
TRIAL_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$"
#: A SKILL.md path as the dialog shows it.
FILE_PATTERN = r"^[^\x00-\x1f\x7f]{1,4096}$"
#: ``$SKILL_COURT_STORE`` overrides the profile's store (tests, unusual layouts).
STORE_ENV = "SKILL_COURT_STORE"

router = APIRouter()


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False)


class Target(_Strict):
    """One skill on one model (``*`` = every model)."""

    skill: str = Field(pattern=NAME_PATTERN)
    model: str = Field(pattern=NAME_PATTERN)


class ApplyBody(_Strict):
    """The file the confirmation dialog named."""

    file: str = Field(pattern=FILE_PATTERN)


def hermes_home() -> Path:
    """The profile the dashboard serves (Hermes' own resolution, profiles included)."""
    try:
        from hermes_constants import get_hermes_home  # type: ignore[import-untyped]
    except ImportError:  # Hermes is not installed in this Python: its environment variable then
        return default_hermes_home()
    return Path(get_hermes_home())


def paths() -> court.Paths:
    """The store and quarantine file of the profile being served."""
    home = hermes_home()
    store = os.environ.get(STORE_ENV, "").strip()
    return court.Paths(store=Path(store).expanduser() if store else hermes_layout(home).store,
                       quarantine=quarantine_file(), hermes_home=home)


def require_secret(request: Request) -> None:
    """Refuse (403, saying how to get it) a change whose request does not carry the
    profile owner's secret; the first change asked makes the secret file."""
    home = hermes_home()
    where = secret.secret_path(home)
    try:
        value, _ = secret.ensure(where, secret.owner_of(home))
    except secret.SecretError as exc:
        raise HTTPException(status_code=403, detail=f"refused: {exc}. Nothing was changed") from None
    sent = request.headers.get(secret.HEADER, "")
    if not sent:
        raise HTTPException(status_code=403, detail=(
            "refused: a change from the Skill Court tab needs the profile owner's dashboard secret (Hermes' "
            f"session token alone is given to any local user). {secret.how_to_get(where)}. Nothing was changed"))
    if not secret.matches(sent, value):
        raise HTTPException(status_code=403, detail=(
            f"refused: the dashboard secret sent is not the one in {where} (deleting that file makes a new "
            f"one). {secret.how_to_get(where)}. Nothing was changed"))


def _refused(exc: court.Refused) -> HTTPException:
    return HTTPException(status_code=exc.status, detail=str(exc))


def _blank(*values: str) -> None:
    for value in values:
        if not value.strip():
            raise HTTPException(status_code=400, detail="skill and model must not be blank "
                                "(a model name, or '*' for every model)")


@router.get("/state")
def get_state() -> dict[str, Any]:
    """Everything the tab shows (and where the secret for changes is)."""
    state = court.court_state(paths())
    state["secret_file"] = str(secret.secret_path(hermes_home()))
    return state


@router.get("/report")
def get_report(trial: str = Query(pattern=TRIAL_PATTERN)) -> dict[str, Any]:
    """The report page of session ``trial``, from the store."""
    from pytest_skillcourt.report.html import (  # jinja2: only when a page is asked for
        render_html,
        store_data,
    )

    where = paths()
    try:
        store = Store(where.store, readonly=True)
    except StoreError as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from None
    try:
        data = store_data(store, trial)
    except KeyError as exc:
        raise HTTPException(status_code=404, detail=str(exc.args[0])) from None
    finally:
        store.close()
    return {"trial": trial, "html": render_html(data)}


@router.post("/unlock", dependencies=[Depends(require_secret)])
def post_unlock() -> dict[str, Any]:
    """The secret sent is right (else :func:`require_secret` refused); changes nothing."""
    return {"unlocked": True, "secret_file": str(secret.secret_path(hermes_home()))}


@router.post("/quarantine", dependencies=[Depends(require_secret)])
def post_quarantine(body: Target) -> dict[str, Any]:
    """Quarantine a skill for a model by hand."""
    _blank(body.skill, body.model)
    try:
        return court.quarantine_skill(paths(), body.skill, body.model)
    except court.Refused as exc:
        raise _refused(exc) from None


@router.post("/release", dependencies=[Depends(require_secret)])
def post_release(body: Target) -> dict[str, Any]:
    """Release a skill's entry for a model."""
    _blank(body.skill, body.model)
    try:
        return court.release_skill(paths(), body.skill, body.model)
    except court.Refused as exc:
        raise _refused(exc) from None


@router.post("/appeals/{appeal_id}/apply", dependencies=[Depends(require_secret)])
def post_apply(body: ApplyBody, appeal_id: int = PathParam(ge=1, le=2**62)) -> dict[str, Any]:
    """Apply the granted appeal ``appeal_id`` over the file its dialog named."""
    try:
        return court.apply_fix(paths(), appeal_id, body.file)
    except court.Refused as exc:
        raise _refused(exc) from None
