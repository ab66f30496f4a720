"""CITATION.cff (issue 42): valid under the Citation File Format's own schema, the software's fields those of
pyproject.toml and the book, the paper as its preferred citation, and the README's "How to cite" saying the same.

The schema, tests/schemas/citation-file-format-1.2.0.json, is the one the format publishes at its $id
(https://citation-file-format.github.io/1.2.0/schema.json, CC-BY-4.0), copied byte for byte from the cffconvert 2.0.0
wheel on PyPI (cffconvert/schemas/1.2.0/schema.json); its sha256 is checked below. It is validated with jsonschema and
a format checker, as `cffconvert --validate` does: cffconvert itself cannot be a dependency here, as it requires
jsonschema < 4 and this environment's Jupyter stack has jsonschema 4."""
import hashlib
import json
import re
import tomllib
from pathlib import Path

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = Path(__file__).parent / "schemas" / "citation-file-format-1.2.0.json"
SCHEMA_SHA256 = "0b8d22140da702d766df318dcff3a91af2f39521298dcf36d76315fd99cc169b"


def _cff() -> dict:
    return yaml.safe_load((ROOT / "CITATION.cff").read_text())


def schema_errors(doc: dict) -> list[str]:
    schema = json.loads(SCHEMA.read_text())
    validator = jsonschema.Draft7Validator(schema, format_checker=jsonschema.FormatChecker())
    return sorted(f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}" for e in validator.iter_errors(doc))


def test_citation_cff_is_valid_under_the_formats_schema():
    assert hashlib.sha256(SCHEMA.read_bytes()).hexdigest() == SCHEMA_SHA256  # the published schema, unedited
    assert json.loads(SCHEMA.read_text())["$id"] == "https://citation-file-format.github.io/1.2.0/schema.json"
    doc = _cff()
    assert doc["cff-version"] == "1.2.0"
    assert schema_errors(doc) == []


@pytest.mark.parametrize("breaks", [
    lambda d: d.pop("authors"),  # required
    lambda d: d["preferred-citation"].update(type="paper"),  # not one of the format's reference types
    lambda d: d.update(doi="not-a-doi"),
    lambda d: d["preferred-citation"]["authors"][0].update(orcid="0000-0002"),
    lambda d: d.update(**{"date-released": "2026-13-01"}),  # not a date
])
def test_the_schema_check_finds_a_broken_citation(breaks):
    doc = _cff()
    breaks(doc)
    assert schema_errors(doc) != []


def test_the_software_is_the_packages_and_the_preferred_citation_the_books_paper():
    doc, proj = _cff(), tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert doc["type"] == "software"
    assert (doc["title"], doc["version"], doc["abstract"], doc["license"]) == (
        proj["name"], proj["version"], proj["description"], proj["license"])
    book_author = yaml.safe_load((ROOT / "book" / "_config.yml").read_text())["author"]
    assert doc["authors"] == [{"name": book_author}]
    assert "doi" not in json.dumps(doc).lower()  # none is known: none invented

    paper = doc["preferred-citation"]
    bib = _bibtex_entries((ROOT / "book" / "references.bib").read_text())["le2020metacl"]
    assert paper["type"] == "conference-paper" and _paper_fields(paper) == bib


def _bibtex_entries(text: str) -> dict[str, dict]:
    """key -> {"type": entry type, field: value} of the BibTeX entries in `text` (one field per line, as written here
    and in book/references.bib), the braces around a value removed."""
    out = {}
    for kind, key, body in re.findall(r"@(\w+)\{([\w-]+),\n(.*?)\n\}", text, re.S):
        fields = dict(re.findall(r"^\s*(\w+)\s*=\s*\{(.*)\},?\s*$", body, re.M))
        out[key] = {"type": kind, **{name.lower(): value for name, value in fields.items()}}
    return out


def _paper_fields(paper: dict) -> dict:
    """The BibTeX fields the preferred citation gives."""
    [arxiv] = [i["value"].removeprefix("arXiv:") for i in paper["identifiers"] if i["value"].startswith("arXiv:")]
    assert paper["url"] == f"https://arxiv.org/abs/{arxiv}"
    return {"type": "inproceedings", "title": paper["title"],
            "author": " and ".join(f"{a['family-names']}, {a['given-names']}" for a in paper["authors"]),
            "booktitle": paper["collection-title"], "year": str(paper["year"]), "eprint": arxiv,
            "archiveprefix": "arXiv"}


def _software_fields(doc: dict) -> dict:
    return {"type": "software", "title": doc["title"],
            "author": " and ".join("{" + a["name"] + "}" if "name" in a else f"{a['family-names']}, {a['given-names']}"
                                   for a in doc["authors"]),
            "version": str(doc["version"])}


def readme_how_to_cite(readme: str) -> str:
    return readme.split("\n## How to cite\n", 1)[1].split("\n## ", 1)[0]


def test_the_readmes_how_to_cite_says_what_citation_cff_says():
    """The section's BibTeX entries, the paper's then the software's, have exactly the fields CITATION.cff gives, and
    the text names the file and its message's request (the paper, and the commit used)."""
    doc = _cff()
    section = readme_how_to_cite((ROOT / "README.md").read_text())
    blocks = re.findall(r"```bibtex\n(.*?)```", section, re.S)
    entries = [next(iter(_bibtex_entries(b).values())) for b in blocks]
    assert entries == [_paper_fields(doc["preferred-citation"]), _software_fields(doc)]
    assert "`CITATION.cff`" in section and "cite the paper" in section and "the commit you used" in section
    assert "cite the paper" in doc["message"] and "the commit you used" in doc["message"]


def test_a_readme_that_differs_from_citation_cff_is_found():
    """The check above on a README whose paper has another year, and whose software has another version."""
    doc, readme = _cff(), (ROOT / "README.md").read_text()
    for old, new in (("year      = {2020}", "year      = {2019}"), ("version = {0.1.0}", "version = {0.2.0}")):
        assert readme.count(old) == 1
        blocks = re.findall(r"```bibtex\n(.*?)```", readme_how_to_cite(readme.replace(old, new)), re.S)
        entries = [next(iter(_bibtex_entries(b).values())) for b in blocks]
        assert entries != [_paper_fields(doc["preferred-citation"]), _software_fields(doc)]
