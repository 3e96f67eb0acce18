"""Approvals, the requesting half (docs/agents.md, "Approvals"): a drafter key's send
held as an Approval, its API shape, its expiry. Below campaigns, whose views hold a
drafter's sends here; the deciding half, which runs them, is
outreach.approval_decisions."""
