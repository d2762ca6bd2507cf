"""`python -m vrag_rl.policy_server serve ...` (same as the `vrag-policy` console script)."""
from vrag_rl.policy_server.cli import main

main()
