"""The public page that proves a signup address: GET /signup/verify/<token> shows a button,
its POST proves the address (accounts.verification). HTML for people, not the API."""

from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt

from accounts.verification import (
    LinkInvalid,
    account_email_verify,
    resend_url,
    token_account,
)
from config.api.handlers import methods_allowed


# The token in the URL is the credential; a forged cross-site POST could only do what the
# link's holder can do already (prove that one address, once).
@csrf_exempt
@never_cache
@methods_allowed("GET", "HEAD", "POST")
def email_verify_page(request, token: str):
    """GET (and HEAD): the confirmation page, which changes nothing, so a mail scanner
    fetching the link proves nothing. POST (its button): the address is proven."""
    if request.method == "HEAD":
        return HttpResponse(content_type="text/html; charset=utf-8")
    try:
        account = token_account(token)
    except LinkInvalid as exc:
        context = {"reason": str(exc), "resend_url": resend_url()}
        return render(request, "accounts/verify_invalid.html", context, status=404)
    context = {"email": account.email}
    if request.method == "POST":
        account_email_verify(account=account)
        return render(request, "accounts/verify_done.html", context)
    if account.email_verified:
        return render(request, "accounts/verify_done.html", context)
    return render(request, "accounts/verify_confirm.html", {**context, "action": request.path})
