from django.contrib import admin

from accounts.models import Account


@admin.register(Account)
class AccountAdmin(admin.ModelAdmin):
    list_display = ("email", "name", "plan", "psp_customer_id", "created_at")
    search_fields = ("email", "name", "psp_customer_id")
    list_select_related = ("plan",)
