"""The README's generated results section: what the pipeline writes, and the explicit update.

`snakemake all` writes the section to `results/readme_results.md` and never touches the
README (a tracked file). ``python -m slim.pipeline.readme`` copies it into README.md
between the ``<!-- results:start -->`` and ``<!-- results:end -->`` markers, on request.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from slim.errors import SlimError

GENERATED_SECTION = "results"
GENERATED_FILE = Path("results/readme_results.md")
ACCELERATORS_SECTION = "accelerators"
ACCELERATORS_FILE = Path("results/accelerators/cross_accelerator.md")
"""The cross-accelerator table (target `accelerators`, with config/accelerators.yaml): copied into
its own README section when it exists, so an `all` without those datasets leaves it as it was."""


def results_section(summaries: Sequence[str], skipped_lines: Sequence[str]) -> str:
    """The generated section: the summaries in order, after a note naming each dataset this run
    skipped for want of its real traces (so a section built without them says so)."""
    parts = []
    if skipped_lines:
        notes = "\n".join(f"- {line}" for line in skipped_lines)
        parts.append(f"**Datasets skipped in this build** (their results are absent below):\n\n{notes}\n")
    parts += list(summaries)
    return "\n".join(parts)


def replace_section(text: str, name: str, body: str) -> str:
    """Replace what lies between ``<!-- name:start -->`` and ``<!-- name:end -->``."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    if start not in text or end not in text:
        raise SlimError(f"README has no generated section '{name}' (markers {start} ... {end})")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{start}\n{body.strip()}\n{end}{tail}"


def section(text: str, name: str) -> str:
    """What lies between the markers of a generated section, stripped."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    if start not in text or end not in text:
        raise SlimError(f"README has no generated section '{name}' (markers {start} ... {end})")
    return text.split(start, 1)[1].split(end, 1)[0].strip()


def update_readme(readme: Path, generated: Path, accelerators: Path | None = None) -> bool:
    """Copy `generated` into the README's results section and, where the file `accelerators` exists,
    it into the ``accelerators`` section; True if the README changed."""
    if not generated.is_file():
        raise SlimError(f"{generated} does not exist; build it first: snakemake --cores 2 {generated}")
    old = readme.read_text()
    new = replace_section(old, GENERATED_SECTION, generated.read_text())
    if accelerators is not None and accelerators.is_file():
        new = replace_section(new, ACCELERATORS_SECTION, accelerators.read_text())
    if new != old:
        readme.write_text(new)
    return new != old


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m slim.pipeline.readme",
        description="Copy the pipeline's generated results section into README.md (run `snakemake all` first).")
    parser.add_argument("--readme", type=Path, default=Path("README.md"))
    parser.add_argument("--generated", type=Path, default=GENERATED_FILE)
    parser.add_argument("--accelerators", type=Path, default=ACCELERATORS_FILE,
                        help="the cross-accelerator table, copied where it exists (target `accelerators`)")
    args = parser.parse_args(argv)
    try:
        changed = update_readme(args.readme, args.generated, args.accelerators)
    except SlimError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"{args.readme}: results section {'updated' if changed else 'already up to date'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
