"""Admin login lockouts (django-axes): failed logins counted per client address and per
username, a cool-off, and the client-address rule of the rest of the service."""

from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.core.management import call_command
from django.db.models import F
from django.test import Client

from tests.conftest import client_for

pytestmark = pytest.mark.django_db

LOCKED = "Login locked: too many failed attempts from this address or for this username."
REFUSED = "Please enter the correct username and password"
PASSWORD = "right-horse-battery"
A, B, C = "203.0.113.10", "203.0.113.20", "203.0.113.30"


@pytest.fixture
def staff(django_user_model):
    return django_user_model.objects.create_user("staff", password=PASSWORD, is_staff=True)


@pytest.fixture
def other_staff(django_user_model):
    return django_user_model.objects.create_user("other", password=PASSWORD, is_staff=True)


def _login(username: str, password: str, address: str, **extra):
    """One login, from a browser of its own (no session left from an earlier one)."""
    data = {"username": username, "password": password, "next": "/admin/"}
    return Client().post("/admin/login/", data, REMOTE_ADDR=address, **extra)


def _assert_refused(response):
    assert response.status_code == 200
    assert REFUSED in response.content.decode()


def _assert_locked(response):
    assert response.status_code == 429
    page = response.content.decode()
    assert LOCKED in page
    assert "Try again in 15 minutes." in page
    assert response["Retry-After"] == "900"


def _assert_logged_in(response):
    assert response.status_code == 302, response.content.decode()[:500]
    assert response["Location"] == "/admin/"


def _lock_address(address: str, **extra) -> None:
    """Five wrong passwords from one address, each for another username."""
    for n in range(4):
        _assert_refused(_login(f"guess{n}", "wrong", address, **extra))
    _assert_locked(_login("guess4", "wrong", address, **extra))


def test_wrong_passwords_from_one_address_lock_it_out(staff):
    _lock_address(A)
    # The right password of a real user is refused from there too, without being checked.
    _assert_locked(_login("staff", PASSWORD, A))
    # The user is not locked: from another address they log in.
    _assert_logged_in(_login("staff", PASSWORD, B))


def test_wrong_passwords_for_one_username_from_many_addresses_lock_it_out(staff, other_staff):
    for n in range(4):
        _assert_refused(_login("staff", "wrong", f"198.51.100.{n}"))
    _assert_locked(_login("staff", "wrong", "198.51.100.4"))
    # From any address, with the right password too.
    _assert_locked(_login("staff", PASSWORD, C))
    # Those addresses are not locked: another staff user logs in from one of them.
    _assert_logged_in(_login("other", PASSWORD, "198.51.100.4"))


def test_a_lockout_ends_after_its_cool_off_and_attempts_meanwhile_do_not_extend_it(staff):
    for _ in range(5):
        _login("staff", "wrong", A)
    for _ in range(3):
        _assert_locked(_login("staff", PASSWORD, A))

    AccessAttempt.objects.update(attempt_time=F("attempt_time") - timedelta(minutes=14))
    _assert_locked(_login("staff", PASSWORD, A))
    AccessAttempt.objects.update(attempt_time=F("attempt_time") - timedelta(minutes=2))
    _assert_logged_in(_login("staff", PASSWORD, A))


def test_staff_unlock_a_username_or_an_address_with_axes_commands(staff):
    for n in range(5):
        _login("staff", "wrong", f"198.51.100.{n}")
    _assert_locked(_login("staff", PASSWORD, C))
    call_command("axes_reset_username", "staff")
    _assert_logged_in(_login("staff", PASSWORD, C))

    _lock_address(A)
    call_command("axes_reset_ip", A)
    _assert_logged_in(_login("staff", PASSWORD, A))


def test_behind_a_trusted_proxy_the_forwarded_client_is_locked_not_the_proxy(staff, settings):
    settings.TRUSTED_PROXIES = ["10.0.0.1"]
    _lock_address("10.0.0.1", HTTP_X_FORWARDED_FOR=A)
    _assert_locked(_login("staff", PASSWORD, "10.0.0.1", HTTP_X_FORWARDED_FOR=A))
    # Another client behind the same proxy is not the proxy.
    _assert_logged_in(_login("staff", PASSWORD, "10.0.0.1", HTTP_X_FORWARDED_FOR=B))


def test_a_client_connecting_directly_cannot_lock_another_address_out(staff, settings):
    settings.TRUSTED_PROXIES = ["10.0.0.1"]
    _lock_address("192.0.2.66", HTTP_X_FORWARDED_FOR=A)
    _assert_logged_in(_login("staff", PASSWORD, A))
    _assert_locked(_login("staff", PASSWORD, "192.0.2.66"))


def test_ipv6_clients_are_locked_out_per_64(staff):
    _lock_address("2001:db8:1:2::1")
    _assert_locked(_login("staff", PASSWORD, "2001:db8:1:2:ffff::9"))
    _assert_logged_in(_login("staff", PASSWORD, "2001:db8:1:3::1"))


def test_the_api_is_not_affected_by_a_locked_address(api_key):
    _lock_address(A)
    assert client_for(api_key.plaintext).get("/api_keys", REMOTE_ADDR=A).status_code == 200
