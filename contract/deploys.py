"""Names shared by the deploy commands and the thread workflow (docs/deploys.md)."""

from __future__ import annotations

# Wakes an idle thread so it reaches its idle safe point and, when its worker deployment
# has a new target version, continues as new onto it. Temporal tells a pinned run of a new
# version only in a workflow task, and an idle thread has none until something happens.
SIGNAL_UPGRADE_CHECK = "upgrade_check"

# `thread.updated {continuedAsNew: {reason}}` of a run that moved to a new build.
REASON_VERSION_CHANGED = "deployment_version_changed"
