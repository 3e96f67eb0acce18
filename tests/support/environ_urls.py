"""The service's routes plus GET /environ: the string items of request.META, as a view
(or an error report) sees them."""

from django.http import JsonResponse
from django.urls import include, path


def environ(request):
    return JsonResponse({k: v for k, v in request.META.items() if isinstance(v, str)})


urlpatterns = [path("environ", environ), path("", include("config.urls"))]
