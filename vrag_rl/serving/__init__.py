"""Serving: the agents and policies behind network protocols.

`policy_server/` serves a policy as an OpenAI-compatible chat endpoint (`vrag-policy`: transformers, the
scripted and rule-based CPU stand-ins, and the stand-ins of installed agent plugins); `mcp_server.py` serves
the agents as MCP tools (`vrag-mcp`). Both sit above the agent kit and import it, never the other way.
"""
