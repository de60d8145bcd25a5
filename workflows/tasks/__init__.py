"""Tasks on Temporal: the `TaskRun` workflow, one per task (docs/tasks.md)."""
