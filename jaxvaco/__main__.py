"""`python -m jaxvaco`: the `jaxvaco` command."""

from jaxvaco.process import main

main()
