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
"""

from django.contrib.admin.options import BaseModelAdmin

from config.db.rows import row_change


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

    def get_readonly_fields(self, request, obj=None):
        if self.fields is None:  # no form layout: the page names its read-only fields
            return super().get_readonly_fields(request, obj)
        return [f for f in self.get_fields(request, obj) if f not in self.editable]
