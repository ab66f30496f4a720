import sys

try:
    from .cli import main
except KeyboardInterrupt:  # Ctrl-C in the first moments: no traceback (the command line's own handling follows)
    print("\ninterrupted", file=sys.stderr)
    sys.exit(130)

sys.exit(main())
