"""Approvals, the deciding half (docs/agents.md, "Approvals"): the /approvals API, and
approving, which runs the held send once, as it would run at that moment. Above
campaigns and conversations, whose sends it runs."""
