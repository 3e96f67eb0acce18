"""MCP server for the outreach service, built on outreach_sdk."""

__version__ = "0.1.0"
