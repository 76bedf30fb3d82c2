"""Keep generated sections of the README in step with the pipeline's outputs."""

from slim.errors import SlimError


def replace_section(text: str, name: str, body: str) -> str:
    """Replace what lies between ``<!-- name:start -->`` and ``<!-- name:end -->``."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    if start not in text or end not in text:
        raise SlimError(f"README has no generated section '{name}' (markers {start} ... {end})")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{start}\n{body.strip()}\n{end}{tail}"
