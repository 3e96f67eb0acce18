"""Admin login lockouts (django-axes, configured in settings: "admin login"): the client
address they are keyed by, and the page a locked-out login gets."""

import ipaddress

from axes.helpers import get_cool_off
from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from accounts.throttling import client_ip, client_ip_bucket


def admin_login_client_address(request: HttpRequest) -> str | None:
    """The address a failed admin login counts against: the service's one client-IP rule
    (client_ip: X-Forwarded-For only from TRUSTED_PROXIES), IPv6 per /64 as every limit
    counts it. Axes keeps an address, so a /64 is written as its first address
    (2001:db8:1:2::); `manage.py axes_reset_ip` takes it in that form."""
    bucket = client_ip_bucket(client_ip(request))
    try:
        return str(ipaddress.ip_network(bucket, strict=False).network_address)
    except ValueError:  # no usable REMOTE_ADDR
        return None


def admin_login_locked_out(
    request: HttpRequest,
    original_response: HttpResponse | None,
    credentials: dict[str, object] | None,
) -> HttpResponse:
    """429 in the admin's look, saying why the login is refused and for how long (the
    same page for a username that exists and one that does not)."""
    cool_off = get_cool_off(request)
    minutes = round(cool_off.total_seconds() / 60) if cool_off else None
    context = {**admin.site.each_context(request), "title": "Login locked", "minutes": minutes}
    response = render(request, "admin/login_locked_out.html", context, status=429)
    if cool_off:  # at most this long: the lockout ends then, or sooner
        response["Retry-After"] = str(int(cool_off.total_seconds()))
    return response
