"""Links mailed under a former SECRET_KEY keep working while it is kept in
SECRET_KEY_FALLBACKS (README, Production), and die with it otherwise."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client

from outreach.sending import tokens
from tests.intake.factories import sent_enrollment

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
ONE_CLICK = {
    "data": "List-Unsubscribe=One-Click",
    "content_type": "application/x-www-form-urlencoded",
}


def legacy_link(enrollment_id) -> str:
    return f"/u/{tokens.token_make(purpose=tokens.UNSUBSCRIBE, enrollment_id=enrollment_id)}"


def test_links_survive_a_key_rotation_with_the_old_key_in_the_fallbacks(settings):
    enrollment = sent_enrollment()
    old_key = settings.SECRET_KEY
    link = legacy_link(enrollment.pk)
    pixel = f"/t/o/{tokens.token_make(purpose=tokens.OPEN, enrollment_id=enrollment.pk)}.gif"

    settings.SECRET_KEY = "rotated-" + "k" * 50
    settings.SECRET_KEY_FALLBACKS = [old_key]
    assert Client().get(link).status_code == 200
    assert Client().get(pixel).status_code == 200
    enrollment.refresh_from_db()
    assert enrollment.opened_at is not None
    assert Client().post(link, **ONE_CLICK).status_code == 200
    # New links are signed with the new key.
    assert tokens.token_make(purpose=tokens.OPEN, enrollment_id=enrollment.pk) not in pixel


def test_links_die_with_their_key_when_it_is_not_kept(settings):
    enrollment = sent_enrollment()
    link = legacy_link(enrollment.pk)
    settings.SECRET_KEY = "rotated-" + "k" * 50
    settings.SECRET_KEY_FALLBACKS = []
    assert Client().get(link).status_code == 404
    assert Client().post(link, **ONE_CLICK).status_code == 404
    enrollment.contact.refresh_from_db()
    assert enrollment.contact.unsubscribed_at is None


def test_the_fallbacks_come_from_the_environment(tmp_path):
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE")
    }
    code = "from config import settings as s; print(s.SECRET_KEY_FALLBACKS)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**env, "VAR_DIR": str(tmp_path), "SECRET_KEY_FALLBACKS": "old-one,older-one"},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert out.stdout.strip() == "['old-one', 'older-one']"
