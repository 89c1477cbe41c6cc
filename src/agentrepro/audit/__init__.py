"""Whether every output of a study is what its frozen lock planned and produced, unchanged since it was sealed:
the audit of a study on disk (`audit_study`) and of a reviewer's bundle (`audit_bundle`), and the bundle itself.

Modules: study.py (the chain from the lock up), tree.py (what the output trees hold, read without following a
link), runs.py (one run and its evaluations), warmstart.py (the shared warm starts), chain.py (the analysis read
these runs, the report shows this analysis), recount.py and report.py (the analysis and the report made again from
the outcomes), result.py (the audit's words about itself), code.py (which code the jobs ran, against the lock),
failures.py (the study's own failures), bundle.py (pack and verify); the verbs are cli/audit.py and cli/bundle.py.
"""

from agentrepro.audit.bundle import audit_bundle, write_bundle
from agentrepro.audit.result import coverage
from agentrepro.audit.study import audit_result, audit_study

__all__ = ["audit_bundle", "audit_result", "audit_study", "coverage", "write_bundle"]
