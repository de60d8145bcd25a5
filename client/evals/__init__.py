"""Eval suites: load cases, run each as a real thread, check expectations, report
(docs/evals.md). The worker that runs them is composed by `weft.evals` or `weft eval`."""
