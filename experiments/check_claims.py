"""`python -m experiments.check_claims [--fast] [--only ID ...] [--record] ...`: measure the
claims again and compare them with the record (the command; `experiments.claims.check`)."""

import sys

from experiments.claims.check import main

if __name__ == "__main__":
    sys.exit(main())
