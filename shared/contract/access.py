"""Who may read a document: its access labels, a caller's grants, and the one rule joining them.

Every document carries `acl`, a tuple of labels: group names, principals written
`user:<subject>`, or PUBLIC (everyone who may query). A document with no labels is readable
only by callers with `all_access` (the service account): deny by default. A caller reads a
document when any of its grants is one of the document's labels. The same rule runs as a
Python predicate (`Access.admits`, the oracle and the per-hit check) and as a vectorised
mask inside each retrieval shard (services/retrieval/columns.py): the two must agree.

Labels travel downstream of redaction as they are, so they must be names, not content:
the grammar below leaves no room for free text, and redaction refuses a document whose
labels hold anything its analyser calls PII (an e-mail address, a phone number).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from shared.errors import InvalidInput

PUBLIC = "public"  # reserved label: every caller that may query reads the document
USER_PREFIX = "user:"  # a label naming one principal (its token's subject) rather than a group
MAX_LABELS = 64
MAX_LABEL_CHARS = 128
LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}")


def parse_acl(value: object, field: str = "acl") -> tuple[str, ...]:
    """Labels from a list of strings or one comma-separated string, sorted and unique.

    Raises InvalidInput(bad_acl) for anything else: another type, a label outside the
    grammar, more than MAX_LABELS labels. The detail never quotes a label (it may reach logs).
    """
    if isinstance(value, str):
        items: list[object] = [p.strip() for p in value.split(",") if p.strip()]
    elif isinstance(value, list | tuple):
        items = list(value)
    else:
        raise InvalidInput("bad_acl", field, f"a list of labels, not {type(value).__name__}")
    if len(items) > MAX_LABELS:
        raise InvalidInput("bad_acl", field, f"{len(items)} labels, at most {MAX_LABELS}")
    for i, item in enumerate(items):
        if not isinstance(item, str) or not LABEL.fullmatch(item):
            raise InvalidInput("bad_acl", field, f"label {i} is not a name "
                               f"([A-Za-z0-9][A-Za-z0-9._:/-]*, at most {MAX_LABEL_CHARS})")
    return tuple(sorted(set(items)))  # type: ignore[arg-type]


@dataclass(frozen=True)
class Access:
    """What one caller may read: its grants (groups, `user:<subject>`, PUBLIC always
    implied), or everything (`all_access`: the service account, or a server without auth)."""

    grants: frozenset[str] = frozenset()
    all_access: bool = False

    @classmethod
    def of(cls, subject: str | None, groups: Iterable[str]) -> Access:
        grants = {*groups, PUBLIC}
        if subject:
            grants.add(USER_PREFIX + subject)
        return cls(frozenset(grants))

    @classmethod
    def everything(cls) -> Access:
        return cls(frozenset({PUBLIC}), all_access=True)

    def admits(self, acl: Iterable[str]) -> bool:
        return self.all_access or not self.grants.isdisjoint(acl)

    def scope(self) -> str:
        """A stable name of what this caller may read (answer-cache scope, audit record)."""
        return "*" if self.all_access else ",".join(sorted(self.grants))
