"""`python -m jaxvaco`: the `jaxvaco` command."""

from jaxvaco.cli.process import main

main()
