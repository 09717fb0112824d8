import sys

from .console import run

sys.exit(run())
