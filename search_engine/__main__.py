from search_engine.cli import main

main()
