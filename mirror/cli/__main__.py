"""`python -m mirror.cli`: the `mirror` command."""

from mirror.cli.commands import main

main()
