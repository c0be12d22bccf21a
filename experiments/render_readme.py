"""`python -m experiments.render_readme [--check]`: write (or check) the generated tables of
README.md and docs/ from the record (the command; `experiments.claims.render`)."""

import sys

from experiments.claims.render import main

if __name__ == "__main__":
    sys.exit(main())
