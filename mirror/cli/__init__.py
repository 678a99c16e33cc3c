"""The command line: typer commands (`commands`), the job table views (`views`)."""
