"""``python -m ember`` is the ``ember`` command."""

from ember.cli.main import main

if __name__ == "__main__":
    main()
