"""``python -m spadework.cli``."""

from spadework.cli import main

if __name__ == "__main__":
    main()
