class RateLimitHeadersMiddleware:
    """Adds the IETF RateLimit-Policy / RateLimit headers to responses whose
    request went through a rate limit (accounts.throttling)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        decision = getattr(request, "rate_limit", None)
        if decision is not None:
            for name, value in decision.headers().items():
                response[name] = value
        return response
