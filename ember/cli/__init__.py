"""The ``ember`` command line (click): one module per command, loaded lazily."""
