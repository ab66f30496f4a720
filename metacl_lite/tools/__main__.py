import sys

try:
    from . import main
except KeyboardInterrupt:  # Ctrl-C in the first moments: no traceback (as `python -m metacl_lite`)
    print("\ninterrupted", file=sys.stderr)
    sys.exit(130)

sys.exit(main())
