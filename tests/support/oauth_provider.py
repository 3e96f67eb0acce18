"""A REAL OAuth 2.0 authorization server on 127.0.0.1, standing in for Google's or
Microsoft's (whose servers tests cannot reach): a token endpoint answering code
exchanges (PKCE S256 checked) and refreshes over HTTP, and an RFC 7662 introspection
endpoint for Dovecot's oauth2 passdb.

Fixture `oauth_provider`: a factory starting one on a free port, in a thread, with the
service's settings pointed at it (client id and secret, authorize and token URLs).

    provider = oauth_provider()               # "google" (or oauth_provider("microsoft"))
    url = connect_page_continue(client, started["authorization_url"])  # the service's page
    params = provider.consent(url, email="owner@example.com")
    client.get("/oauth/callback/google", params)   # {"code": ..., "state": ...}
    provider.deny(url)                        # {"error": "access_denied", "state": ...}
    provider.revoke("owner@example.com")      # its refresh and access tokens stop working
    provider.fail_next(503, times=2)          # the token endpoint answers 503 twice
    provider.token_requests                   # [{"grant_type": ..., ...}] as received
    provider.access_token_valid(user, token)  # what a mail server asks (aiosmtpd sink)
    provider.access_token_issue(email)        # a token for a test's own IMAP client
    provider.grant_issue(email)               # {access_token, refresh_token, ...} as after consent

`consent(..., claims={...})` changes the ID token's claims (None removes one).
"""

import base64
import hashlib
import json
import secrets
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest
from joserfc import jwt
from joserfc.jwk import OctKey

from tests.support.ports import free_port

TENANT = "9f1c5a4e-2b7d-4c3a-8e6f-0a1b2c3d4e5f"
ISSUERS = {
    "google": "https://accounts.google.com",
    "microsoft": f"https://login.microsoftonline.com/{TENANT}/v2.0",
}


@dataclass
class _Grant:
    email: str
    client_id: str
    redirect_uri: str
    code_challenge: str
    nonce: str
    claims: dict = field(default_factory=dict)
    used: bool = False


class _Handler(BaseHTTPRequestHandler):
    server: "_Server"

    def log_message(self, *args):  # quiet
        pass

    def do_POST(self):  # noqa: N802 (http.server's naming)
        length = int(self.headers.get("Content-Length") or 0)
        form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
        provider = self.server.provider
        path = urlsplit(self.path).path
        if path == "/token":
            status, body = provider._token(form)
        elif path == "/introspect":
            status, body = 200, provider._introspect(form.get("token", ""))
        else:
            status, body = 404, {"error": "not_found"}
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header(
            "Content-Type", "text/html" if isinstance(body, bytes) else "application/json"
        )
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address, provider):
        super().__init__(address, _Handler)
        self.provider = provider


class OAuthProvider:
    def __init__(self, name: str = "google"):
        self.name = name
        self.issuer = ISSUERS[name]
        self.client_id = f"{name}-client-{uuid.uuid4().hex[:8]}"
        self.client_secret = secrets.token_urlsafe(16)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.authorize_url = f"{self.url}/authorize"
        self.token_url = f"{self.url}/token"
        self.introspect_url = f"{self.url}/introspect"
        self.access_token_lifetime = 3600
        self.rotate_refresh_tokens = False
        self.token_delay = 0.0  # seconds before the token endpoint answers
        self.token_requests: list[dict] = []
        self._key = OctKey.generate_key(256)
        self._lock = threading.Lock()
        self._codes: dict[str, _Grant] = {}
        self._refresh: dict[str, str] = {}  # refresh token -> email
        self._access: dict[str, tuple[str, float]] = {}  # access token -> (email, expiry)
        self._failures: list[int] = []
        self._server = _Server(("127.0.0.1", self.port), self)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self) -> "OAuthProvider":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    # --- the person at the consent page ---
    def _authorization_request(self, authorization_url: str) -> dict:
        parts = urlsplit(authorization_url)
        assert f"{parts.scheme}://{parts.netloc}{parts.path}" == self.authorize_url
        return {k: v[0] for k, v in parse_qs(parts.query).items()}

    def consent(self, authorization_url: str, *, email: str, claims: dict | None = None) -> dict:
        """Sign in as `email` and allow: the redirect's query parameters."""
        query = self._authorization_request(authorization_url)
        assert query["response_type"] == "code"
        assert query["client_id"] == self.client_id
        assert query["code_challenge_method"] == "S256"
        code = secrets.token_urlsafe(24)
        with self._lock:
            self._codes[code] = _Grant(
                email=email,
                client_id=query["client_id"],
                redirect_uri=query["redirect_uri"],
                code_challenge=query["code_challenge"],
                nonce=query.get("nonce", ""),
                claims=claims or {},
            )
        return {"code": code, "state": query["state"]}

    def deny(self, authorization_url: str) -> dict:
        query = self._authorization_request(authorization_url)
        return {"error": "access_denied", "state": query["state"]}

    # --- scripting ---
    def revoke(self, email: str) -> None:
        with self._lock:
            self._refresh = {t: e for t, e in self._refresh.items() if e != email}
            self._access = {t: v for t, v in self._access.items() if v[0] != email}

    def fail_next(self, status: int = 503, *, times: int = 1) -> None:
        with self._lock:
            self._failures += [status] * times

    def refresh_tokens_of(self, email: str) -> list[str]:
        with self._lock:
            return [t for t, e in self._refresh.items() if e == email]

    def refresh_count(self) -> int:
        return sum(1 for r in self.token_requests if r.get("grant_type") == "refresh_token")

    # --- what mail servers ask ---
    def access_token_valid(self, user: str, token: str) -> bool:
        with self._lock:
            entry = self._access.get(token)
        return entry is not None and entry[0] == user and entry[1] > time.time()

    def access_token_issue(self, email: str) -> str:
        token = "at-" + secrets.token_urlsafe(24)
        with self._lock:
            self._access[token] = (email, time.time() + self.access_token_lifetime)
        return token

    # --- endpoints ---
    def grant_issue(self, email: str) -> dict:
        """A grant as a consent would make it: access and refresh token."""
        refresh_token = "rt-" + secrets.token_urlsafe(32)
        with self._lock:
            self._refresh[refresh_token] = email
        return {
            "access_token": self.access_token_issue(email),
            "token_type": "Bearer",
            "expires_in": self.access_token_lifetime,
            "refresh_token": refresh_token,
        }

    def _id_token(self, grant: _Grant) -> str:
        now = int(time.time())
        claims = {
            "iss": self.issuer,
            "aud": grant.client_id,
            "sub": hashlib.sha256(grant.email.encode()).hexdigest()[:21],
            "iat": now,
            "exp": now + 3600,
            "nonce": grant.nonce,
        }
        if self.name == "google":
            claims.update(email=grant.email, email_verified=True)
        else:
            claims.update(preferred_username=grant.email, tid=TENANT)
        for name, value in grant.claims.items():
            if value is None:
                claims.pop(name, None)
            else:
                claims[name] = value
        return jwt.encode({"alg": "HS256"}, claims, self._key)

    def _token(self, form: dict) -> tuple[int, dict | bytes]:
        self.token_requests.append(dict(form))
        if self.token_delay:
            time.sleep(self.token_delay)
        with self._lock:
            failure = self._failures.pop(0) if self._failures else None
        if failure:
            return failure, b"<html>Service Unavailable</html>"
        if (form.get("client_id"), form.get("client_secret")) != (
            self.client_id,
            self.client_secret,
        ):
            return 401, {"error": "invalid_client"}
        grant_type = form.get("grant_type")
        if grant_type == "authorization_code":
            with self._lock:
                grant = self._codes.get(form.get("code", ""))
                if grant is None or grant.used:
                    return 400, {"error": "invalid_grant", "error_description": "bad code"}
                grant.used = True
            verifier = form.get("code_verifier", "")
            challenge = (
                base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
                .rstrip(b"=")
                .decode()
            )
            if challenge != grant.code_challenge or form.get("redirect_uri") != (
                grant.redirect_uri
            ):
                return 400, {"error": "invalid_grant", "error_description": "PKCE failed"}
            return 200, {**self.grant_issue(grant.email), "id_token": self._id_token(grant)}
        if grant_type == "refresh_token":
            token = form.get("refresh_token", "")
            with self._lock:
                email = self._refresh.get(token)
                if email is not None and self.rotate_refresh_tokens:
                    del self._refresh[token]
            if email is None:
                return 400, {
                    "error": "invalid_grant",
                    "error_description": "Token has been expired or revoked.",
                }
            tokens = self.grant_issue(email) if self.rotate_refresh_tokens else None
            if tokens is None:
                return 200, {
                    "access_token": self.access_token_issue(email),
                    "token_type": "Bearer",
                    "expires_in": self.access_token_lifetime,
                }
            return 200, tokens
        return 400, {"error": "unsupported_grant_type"}

    def _introspect(self, token: str) -> dict:
        with self._lock:
            entry = self._access.get(token)
        if entry is None or entry[1] <= time.time():
            return {"active": False}
        return {"active": True, "username": entry[0], "client_id": self.client_id}


def connect_page_continue(client, authorization_url: str) -> str:
    """The mailbox's owner at the service's connect page (the API's `authorization_url`):
    opens it and presses its button. Returns the provider URL the browser is sent on to;
    the state's cookie stays in `client`, the browser that comes back to the callback."""
    path = urlsplit(authorization_url).path
    page = client.get(path)
    assert page.status_code == 200, page.content.decode()
    response = client.post(path)
    assert response.status_code == 303, response.content.decode()
    return response["Location"]


def credential_connect(credential, provider: OAuthProvider, email: str, *, expires_in) -> None:
    """Make `credential` the OAuth mailbox of `email` as a consent at `provider` leaves it
    (its grant stored, status connected), its access token valid for `expires_in`."""
    from django.utils import timezone

    grant = provider.grant_issue(email)
    credential.from_email = email
    credential.auth_method = f"oauth_{provider.name}"
    credential.oauth_status = "connected"
    credential.smtp_username = credential.imap_username = email
    credential.smtp_password = credential.imap_password = ""
    credential.oauth_refresh_token = grant["refresh_token"]
    credential.oauth_access_token = grant["access_token"]
    credential.oauth_access_token_expires_at = timezone.now() + expires_in
    credential.save()


@pytest.fixture
def oauth_provider(settings):
    providers: list[OAuthProvider] = []

    def start(name: str = "google") -> OAuthProvider:
        provider = OAuthProvider(name).start()
        prefix = name.upper()
        setattr(settings, f"{prefix}_OAUTH_CLIENT_ID", provider.client_id)
        setattr(settings, f"{prefix}_OAUTH_CLIENT_SECRET", provider.client_secret)
        setattr(settings, f"{prefix}_OAUTH_AUTHORIZE_URL", provider.authorize_url)
        setattr(settings, f"{prefix}_OAUTH_TOKEN_URL", provider.token_url)
        providers.append(provider)
        return provider

    yield start
    for provider in providers:
        provider.stop()
