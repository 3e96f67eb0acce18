from django.urls import path

from plans.api import PlanListView

urlpatterns = [path("plans", PlanListView.as_view(), name="plan-list")]
