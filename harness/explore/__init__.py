"""Design-space exploration: `./run_all.py explore SPACE.yaml` (command.py; README: harness/README.md)."""
