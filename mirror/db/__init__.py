"""Postgres: the job table models, the repository (every SQL statement), migrations."""
