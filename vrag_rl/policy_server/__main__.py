from vrag_rl.policy_server.cli import main

main()
