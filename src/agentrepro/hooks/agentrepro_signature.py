"""A patched framework function's parameters as the integrations pin them: its signature without annotations.

The verl-agent hook and the Relax advantage wrapper refuse to run when a name they wrap has other parameters
than the commit they were written against; annotations are left out (verl-agent's recipe annotates
`data: DataProto`). Python standard library only.
"""

from __future__ import annotations

import inspect


def bare(function) -> str:
    """`function`'s signature as text, without parameter or return annotations."""
    signature = inspect.signature(function)
    return str(
        signature.replace(
            parameters=[p.replace(annotation=inspect.Parameter.empty) for p in signature.parameters.values()],
            return_annotation=inspect.Signature.empty,
        )
    )
