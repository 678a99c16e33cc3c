"""Test stand-ins shipped with the package (the demo uses them too)."""
