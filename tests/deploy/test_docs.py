"""docs/operations.md names deploy files that exist, and its links within the page lead to a heading."""

from __future__ import annotations

import re

from tests.deploy.settings import ROOT

OPERATIONS = ROOT / "docs" / "operations.md"


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_deploy_and_test_file_it_names_exists() -> None:
    text = OPERATIONS.read_text()
    named = set(re.findall(r"(?<![\w/])((?:deploy|tests/deploy)/[\w./@-]*\w)", text))
    assert {"deploy/compose.yaml", "deploy/systemd/pai-master.service", "deploy/master.env.example"} <= named
    assert sorted(n for n in named if not (ROOT / n).exists()) == []


def test_every_link_within_the_page_leads_to_a_heading() -> None:
    text = OPERATIONS.read_text()
    anchors = {_slug(h) for h in re.findall(r"(?m)^#{1,6} (.+)$", re.sub(r"(?s)```.*?```", "", text))}
    links = set(re.findall(r"\]\(#([^)]+)\)", text))
    assert sorted(links - anchors) == []
