"""The one base of the admin pages staff read more than they write (every app's
admin.py uses it, pages and inlines alike; config imports no app).

Nothing is ever added from the admin: rows come from the API, the sending engine,
Stripe's notifications. What else a page lets staff do it says by attributes:

    editable    the fields staff may change; every other field is shown read-only
                (pages that list no `fields` name their read-only ones instead)
    can_change  False: a view page, no Save button (webhooks, stored requests, keys)
    can_delete  False: no Delete (Django's own attribute on inlines, the same here)

A save writes only the fields the form changed, on the row read again under its lock
(config.db.rows.row_change): the engine, the API and Stripe's notifications write the
other columns of the same rows while the page is open, and a save of the whole row as
the page read it would put their older values back (a contact's unsubscribe, a
campaign's pause, an account's subscription).

Every change staff make to an account's rows is audited (config.api.audit.staff_audit;
docs/audit.md), in the transaction of the change: additions, changes and deletions where
Django's admin logs them (`log_addition`, `log_change`, `log_deletions`, inside its own
transaction), and each action run on selected rows (`response_action`, made one
transaction here), one row per selected row, named after the action.
"""

from typing import Any

from django.contrib.admin import helpers
from django.contrib.admin.options import BaseModelAdmin
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse

from config.api.audit import staff_audit
from config.db.rows import row_change

# Actions the log_* methods audit already.
_LOGGED_ACTIONS = frozenset({"delete_selected"})


class ReadOnlyAdmin(BaseModelAdmin):
    """Mixed in before admin.ModelAdmin or an inline class: `(ReadOnlyAdmin, admin.ModelAdmin)`."""

    editable: tuple[str, ...] = ()
    can_change = True
    can_delete = True

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return self.can_change and super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None):
        return self.can_delete and super().has_delete_permission(request, obj)

    def save_model(self, request, obj, form, change):
        if not change:
            super().save_model(request, obj, form, change)  # type: ignore[misc]
            return
        changes = {name: form.cleaned_data[name] for name in form.changed_data}

        def apply(current):
            for name, value in changes.items():
                setattr(current, name, value)

        row_change(obj, apply)

    def construct_change_message(self, request, form, formsets, add=False):
        # The field names the audit row lists (never their values).
        request.audit_changes = list(getattr(form, "changed_data", []))
        return super().construct_change_message(request, form, formsets, add)  # type: ignore[misc]

    def log_addition(self, request, obj, message):
        staff_audit(request, obj, verb="create", changes=getattr(request, "audit_changes", []))
        return super().log_addition(request, obj, message)  # type: ignore[misc]

    def log_change(self, request, obj, message):
        staff_audit(request, obj, verb="update", changes=getattr(request, "audit_changes", []))
        return super().log_change(request, obj, message)  # type: ignore[misc]

    def log_deletions(self, request, queryset):
        for obj in queryset:
            staff_audit(request, obj, verb="delete")
        return super().log_deletions(request, queryset)  # type: ignore[misc]

    def response_action(
        self, request: HttpRequest, queryset: QuerySet[Any], *args: Any, **kwargs: Any
    ) -> HttpResponse | None:
        """An action on selected rows: one transaction with its audit rows."""
        name = request.POST.get("action", "")
        with transaction.atomic():
            response = super().response_action(request, queryset, *args, **kwargs)  # type: ignore[misc]
            confirmed = name not in _LOGGED_ACTIONS and request.POST.getlist(
                helpers.ACTION_CHECKBOX_NAME
            )
            if confirmed:
                for obj in queryset.model._default_manager.filter(pk__in=confirmed):
                    staff_audit(request, obj, verb=name)
        return response

    def get_readonly_fields(self, request, obj=None):
        if self.fields is None:  # no form layout: the page names its read-only fields
            return super().get_readonly_fields(request, obj)
        return [f for f in self.get_fields(request, obj) if f not in self.editable]
