"""Subagents (Runtime §7, §8, §10), the parent's and the child's halves.

- `registry.py`: the parent's registry, reports from children, terminate propagation;
- `spawner.py`: child workflows, attachment copies in, the §7.5 scoped-variable deferral;
- `agent_tools.py`: the tools the workflow runs itself (subagent, handoff,
  `subagent_create`, `subagent_message`) and `immediate` subagents;
- `parent_reporter.py`: what a thread started as a subagent reports to its parent;
- `files.py`: copying attachments between thread filesystems.
"""
