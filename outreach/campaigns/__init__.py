"""Campaigns: campaigns, steps and variants, dispatch, campaign state, send windows,
rendering, stopping rules and the sending status."""
