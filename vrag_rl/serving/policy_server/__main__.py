"""`python -m vrag_rl.serving.policy_server serve ...` (same as the `vrag-policy` console script)."""
from vrag_rl.serving.policy_server.cli import main

main()
