"""The staff dashboard (API.md 21, docs/admin.md): the platform's picture in the admin,
read from the account-grain analytics rows (outreach.models.analytics), simulated
traffic left out.

`selectors.py` reads the numbers (sends per day, the busiest accounts, the accounts over
the bounce or complaint line); `views.py` is the admin page (`/admin/dashboard/`, linked
from the admin's index), its charts drawn on the server (config.charts).
"""
