"""``python -m preflight.service.cli``."""

from preflight.service.cli import main

main()
