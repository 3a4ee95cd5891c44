"""Names that are written into the output tables (model, GPU and precision ids and names, the
names of local checkpoints) may not start with what a spreadsheet reads as a formula: `=`, `+`,
`-`, `@`, a tab or a carriage return (OWASP's rule against CSV injection,
https://owasp.org/www-community/attacks/CSV_Injection). They are refused where they are read,
so every table, whatever opens it, holds them as plain text."""

from __future__ import annotations

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
# record fields whose text reaches a table (ids, names, repo ids and aliases that name a record)
TABLE_NAME_FIELDS = frozenset({"id", "name", "hf_repo", "aliases"})


def formula_problem(text: str) -> str | None:
    """Why `text` cannot be a name in a table (None: it can)."""
    if text.startswith(FORMULA_STARTS):
        first = repr(text[0])[1:-1]
        return (
            f"starts with '{first}', which a spreadsheet runs as a formula: names written into "
            "tables may not start with =, +, -, @, a tab or a carriage return"
        )
    return None
