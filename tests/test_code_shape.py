"""The shape of the code a newcomer relies on: imports run one way between layers (every import counted,
those inside functions and under TYPE_CHECKING too), no module imports itself back through others, no
module of `slim/` passes 500 lines, and the rules the project applies in several places (Eq. 13, the
bisection over caps, the candidates a decision judges) are each written once."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO

SLIM = REPO / "slim"
MAX_MODULE_LINES = 500
LAYERS = (
    ("slim", "slim.errors", "slim.columns", "slim.yaml_files", "slim.atomic", "slim.markdown", "slim.defaults"),
    ("slim.specs",),
    ("slim.model", "slim.gpu"),
    ("slim.sim", "slim.traces"),
    ("slim.predictors",),
    ("slim.decision",),
    ("slim.tune",),
    ("slim.advisor",),
    ("slim.paper",),
    ("slim.pipeline", "slim.cli", "slim.__main__"),
)
"""The layers, lowest first: a module imports only from its own package and from layers before its own."""


def _modules() -> dict[str, Path]:
    modules = {}
    for path in sorted(SLIM.rglob("*.py")):
        name = ".".join(path.relative_to(REPO).with_suffix("").parts)
        modules[name.removesuffix(".__init__")] = path
    return modules


def _imports(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Every module each module imports, wherever the import statement stands."""
    edges: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([node.module] if node.module else []))
                targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
            edges[name].update(t for t in targets if t in modules and t != name)
    return edges


def _layer(module: str) -> int:
    best = None
    for rank, members in enumerate(LAYERS):
        for member in members:
            if module == member or module.startswith(member + "."):
                if best is None or len(member) > best[1]:
                    best = (rank, len(member))
    assert best is not None, f"{module} belongs to no layer of LAYERS"
    return best[0]


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def test_no_module_imports_itself_back_through_others():
    modules = _modules()
    edges = _imports(modules)
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for other in edges[module]:
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in on_stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in modules:
        if module not in index:
            visit(module)
    assert cycles == []


def test_imports_run_down_the_layers_only():
    modules = _modules()
    upward = sorted(f"{module} -> {other}" for module, others in _imports(modules).items() for other in others
                    if _package(module) != _package(other) and _layer(other) > _layer(module)
                    and module != "slim")   # the package's own __init__ names only its version
    assert upward == []


def test_no_module_of_slim_passes_500_lines():
    long = {name: len(path.read_text().splitlines()) for name, path in _modules().items()
            if len(path.read_text().splitlines()) > MAX_MODULE_LINES}
    assert long == {}


def test_every_module_opens_with_a_docstring_saying_what_it_is_for():
    missing = [name for name, path in _modules().items() if not ast.get_docstring(ast.parse(path.read_text()))]
    assert missing == []


@pytest.mark.parametrize("pattern, home", [
    (r"def eq13_choice\(", "slim/decision/rule.py"),
    (r"while low < high", "slim/tune/guard.py"),
    (r"CandidateView\(", "slim/decision/candidates.py"),
    (r"def resolve_limits\(", "slim/decision/slo_limits.py"),
])
def test_each_shared_rule_is_written_once(pattern, home):
    found = sorted(str(path.relative_to(REPO)) for path in SLIM.rglob("*.py")
                   if re.search(pattern, path.read_text()))
    assert found == [home]


def test_every_decision_of_the_project_is_the_one_eq13():
    from slim.advisor.bca import select_batch_cap
    from slim.decision.candidates import THROUGHPUT, Estimates, candidate_view
    from slim.decision.rule import eq13_choice, recommend
    from slim.decision.scenarios import scenario_decisions
    from slim.specs.slo import IN_BATCH_E2E

    rng = np.random.default_rng(7)
    caps = np.array([1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0])
    for _ in range(50):
        throughput = np.cumsum(rng.uniform(0.1, 10.0, len(caps))) * 100
        e2e = np.cumsum(rng.uniform(0.1, 1.0, len(caps)))
        slo, epsilon = float(rng.uniform(e2e[0], e2e[-1] * 1.2)), float(rng.uniform(0.05, 0.5))
        t_one = throughput[0]
        expected, _ = eq13_choice(throughput, e2e <= slo, throughput / (caps * t_one), epsilon,
                                  np.ones(len(caps), dtype=bool))
        bca = select_batch_cap(caps, throughput, e2e, slo_s=slo, epsilon=epsilon, throughput_at_one_per_s=t_one)
        view = candidate_view(caps, {THROUGHPUT: Estimates.facts(throughput), IN_BATCH_E2E: Estimates.facts(e2e)}
                              .__getitem__, {IN_BATCH_E2E: slo})
        chosen = recommend(view, epsilon).batch_cap
        in_scenarios = scenario_decisions(view, epsilon)
        assert (bca.batch_cap if bca.feasible else -1) == (caps[expected] if expected >= 0 else -1)
        assert (chosen if np.isfinite(chosen) else -1) == (caps[expected] if expected >= 0 else -1)
        assert set(in_scenarios.tolist()) == {int(expected)}
