"""Contacts: contacts, contact data and emails, suppression, imports from CSV/JSON sources."""
