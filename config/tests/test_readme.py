"""README stays a newcomer's page: short lines, and its links to docs/ resolve."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_no_readme_line_is_over_200_characters():
    long = [n for n, line in enumerate(README.splitlines(), 1) if len(line) > 200]

    assert long == []


def test_readme_links_the_architecture_and_every_linked_doc_exists():
    linked = set(re.findall(r"\]\((docs/[^)#]+)", README))

    assert "docs/architecture.md" in linked
    assert [path for path in sorted(linked) if not (ROOT / path).exists()] == []
