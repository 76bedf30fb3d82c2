"""The generated sections of the README and of docs/results.md: what the pipeline writes, and the
explicit update.

`snakemake all` writes each section to a file under `results/` and never touches a tracked file.
``python -m slim.pipeline.readme`` copies them, on request, between the ``<!-- name:start -->`` and
``<!-- name:end -->`` markers: the headline table into README.md, the full results and the
cross-accelerator tables into docs/results.md (`GENERATED_SECTIONS`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Mapping, Sequence

from slim.errors import SlimError

README = Path("README.md")
RESULTS_PAGE = Path("docs/results.md")


GENERATED_SECTIONS: dict[Path, dict[str, Path]] = {
    README: {"headline": Path("results/readme_headline.md"), "tuning": Path("results/tuning/headline.md")},
    RESULTS_PAGE: {"results": Path("results/readme_results.md"),
                   "accelerators": Path("results/accelerators/cross_accelerator.md"),
                   "beyond_paper": Path("results/beyond_paper/accuracy.md"),
                   "layout_replay": Path("results/beyond_paper/layout_replay.md"),
                   "aiconfigurator_anchor": Path("results/beyond_paper/aiconfigurator_anchor.md"),
                   "tuning": Path("results/tuning/summary.md")},
}
"""Document -> section name -> the generated file copied into it."""

OPTIONAL_SECTIONS = frozenset({"accelerators", "beyond_paper", "layout_replay", "aiconfigurator_anchor", "tuning"})
"""Sections whose file only some builds write (the cross-accelerator table: target `accelerators`;
the accuracy beyond the paper and the layout replay: target `beyond_paper` with config/beyond_paper.yaml;
the tuning replay: target `tuning`; both with config/accelerators.yaml for every accelerator; the
AIConfigurator anchor: `python workflow/bench/aiconfigurator_anchor.py`, with AIConfigurator installed);
where it is absent, the section stays as it was."""


def results_section(summaries: Sequence[str], skipped_lines: Sequence[str]) -> str:
    """The generated results section: the summaries in order, after a note naming each dataset this
    run skipped for want of its real traces (so a section built without them says so)."""
    parts = []
    if skipped_lines:
        notes = "\n".join(f"- {line}" for line in skipped_lines)
        parts.append(f"**Datasets skipped in this build** (their results are absent below):\n\n{notes}\n")
    parts += list(summaries)
    return "\n".join(parts)


def _markers(text: str, name: str) -> tuple[str, str]:
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    if start not in text or end not in text:
        raise SlimError(f"no generated section '{name}' (markers {start} ... {end})")
    return start, end


def replace_section(text: str, name: str, body: str) -> str:
    """Replace what lies between ``<!-- name:start -->`` and ``<!-- name:end -->``."""
    start, end = _markers(text, name)
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{start}\n{body.strip()}\n{end}{tail}"


def section(text: str, name: str) -> str:
    """What lies between the markers of a generated section, stripped."""
    start, end = _markers(text, name)
    return text.split(start, 1)[1].split(end, 1)[0].strip()


def updated_text(document: Path, sections: Mapping[str, Path]) -> str:
    """`document`'s text with each generated file of `sections` (name -> file) copied into its
    section. A missing file is an error, except for an `OPTIONAL_SECTIONS` one."""
    text = document.read_text()
    for name, generated in sections.items():
        if generated.is_file():
            try:
                text = replace_section(text, name, generated.read_text())
            except SlimError as error:
                raise SlimError(f"{document}: {error}") from None
        elif name not in OPTIONAL_SECTIONS:
            raise SlimError(f"{generated} does not exist; build it first: snakemake --cores 2 {generated}")
    return text


def update_documents(documents: Mapping[Path, Mapping[str, Path]] = GENERATED_SECTIONS) -> dict[Path, bool]:
    """Copy every generated section into its document (`GENERATED_SECTIONS`); per document, whether
    it changed. Nothing is written unless every document's sections could be filled."""
    texts = {document: updated_text(document, sections) for document, sections in documents.items()}
    changed = {document: text != document.read_text() for document, text in texts.items()}
    for document, text in texts.items():
        if changed[document]:
            document.write_text(text)
    return changed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m slim.pipeline.readme",
        description="Copy the pipeline's generated sections into README.md and docs/results.md "
                    "(run `snakemake all` first, from the repository root).")
    parser.parse_args(argv)
    try:
        changed = update_documents()
    except SlimError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    for document, was_changed in changed.items():
        print(f"{document}: generated sections {'updated' if was_changed else 'already up to date'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
