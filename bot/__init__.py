"""Footnote's edges: the command line, the Slack app, rendering and scheduling."""
