"""`JobRun`: a batch of items, each run as a task (docs/jobs.md)."""
