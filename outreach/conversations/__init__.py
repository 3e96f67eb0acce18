"""Conversations: the messages a contact sends back, kept, labelled and answered
(docs/conversations.md)."""
