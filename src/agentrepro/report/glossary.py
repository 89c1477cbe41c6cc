"""One-line glosses of the report's jargon, given where each term first appears on the page.

`Glossary().term(word)` prints the word; the first time a page asks for a word that has a gloss, the gloss
follows it in parentheses (`<span class="gloss">`). One Glossary serves one rendering, top to bottom.
"""

from __future__ import annotations

from markupsafe import Markup, escape

GLOSSES = {
    "sealed": "listed with its SHA-256 in its folder's OUTPUTS.sha256, so that any later change shows",
    "ddof": "delta degrees of freedom: ddof = 1 is the sample standard deviation, dividing by n − 1",
    "Wilson": "a confidence interval for a proportion that stays inside [0, 1] and is accurate for small counts",
    "wilson": "the Wilson score interval of one run's k successes of n episodes",
    "wilson_task_clustered": "Wilson's interval at the effective number of trials left once repeated seeds of the same task "
    "are counted as correlated (Kish's design effect)",
    "Holm": "Holm's step-down adjustment of p-values for the several comparisons of one family",
    "McNemar": "the exact test of a paired 2×2 table: were the tasks only one side solved split unevenly?",
    "Newcombe": "Newcombe's (1998, method 10) interval for a difference of paired proportions",
    "newcombe10+mcnemar_exact": "one seed: Newcombe's paired interval and the exact McNemar test on the 2×2 table of tasks",
    "task_clustered_t": "seeds pooled: per-task differences averaged over seeds, a t interval and test with tasks − 1 degrees "
    "of freedom, since the seeds replay the same tasks",
    "task_clustered": "the interval of the rate pooled over seeds with a standard error clustered by task",
    "t_over_seeds": "a t interval over the per-seed rates",
    "welch_tost": "two one-sided Welch t tests against the reference's mean ± std over its seeds",
    "TOST": "two one-sided tests: equivalent when the 90% interval lies inside the margin",
    "tost:clustered_t": "TOST with the task-clustered paired t interval",
    "tost:paired_t": "TOST with the paired t interval of one seed",
    "tost:newcombe10": "TOST with Newcombe's paired interval (wider than the t interval here)",
}


class Glossary:
    """The terms a page has glossed so far; `term` glosses each one once."""

    def __init__(self) -> None:
        self.seen: set[str] = set()

    def term(self, word) -> Markup:
        key = str(word)
        if key not in GLOSSES or key in self.seen:
            return escape(word)
        self.seen.add(key)
        return Markup('{}<span class="gloss"> ({})</span>').format(word, GLOSSES[key])
