"""`dal mcp`: DAL as a Model Context Protocol server for coding agents (docs/mcp.md).

`tools` holds what the tools do, over the Python API; `ceiling` what the operator fixed at start and how an
agent may narrow it; `server` the protocol, with the `mcp` SDK (the optional extra `dal-lang[mcp]`), which
nothing else imports."""
