"""Conversations: the replies the intake keeps, how they are read, labelled and answered
(docs/conversations.md).

`parse` turns the raw bytes of an inbound message into what a person reads (decoded
text, the new part of a reply, sanitized HTML, attachment metadata); `labels` sets the
labels the intake owns (out of office with its return date, auto-reply, unsubscribe
request). Both are pure functions of their input: no database, no network. `models`
holds replies and responses; `selectors`, `services` and `api` read and change them;
`retention` purges old bodies.
"""
