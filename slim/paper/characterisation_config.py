"""The `characterisation` section of config/config.yaml (Figs. 3-6): one model on one GPU and
the sweeps of batch size, input length and output length around a base workload. Parsed and
checked here, without the simulator, so the pipeline's config check can use it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from slim.errors import ConfigError
from slim.specs.architecture import Architecture, ArchitectureCatalog
from slim.specs.hardware import Hardware
from slim.specs.workload import Workload

CONFIG_KEY = "characterisation"
SWEEP_QUANTITIES = ("batch_size", "input_len", "output_len")


@dataclass(frozen=True)
class CharacterisationConfig:
    """The `characterisation` section of config/config.yaml: one model on one GPU, each sweep
    varying one quantity of `base`."""

    model: str
    hardware: str
    base: Workload
    sweeps: tuple[tuple[str, tuple[int, ...]], ...]      # (quantity, values) in config order
    seed: int = 0

    def points(self) -> list[tuple[str, int, Workload]]:
        """(sweep, value, workload) for every value of every sweep."""
        return [(quantity, value, self.base.with_value(quantity, value))
                for quantity, values in self.sweeps for value in values]


def _positive_int(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{key} must be an integer >= 1, got {value!r}")
    return value


def parse_characterisation_config(section: Any, key: str = CONFIG_KEY) -> CharacterisationConfig:
    """Build a `CharacterisationConfig` from the config mapping; `ConfigError` names the bad key."""
    if not isinstance(section, Mapping):
        raise ConfigError(f"{key} must be a mapping with model, hardware, base and sweeps")
    allowed = ("model", "hardware", "base", "sweeps", "seed")
    unknown = sorted(set(section) - set(allowed))
    if unknown:
        raise ConfigError(f"{key}: unknown key(s) {', '.join(map(str, unknown))} (allowed: {', '.join(allowed)})")
    missing = [name for name in allowed[:4] if name not in section]
    if missing:
        raise ConfigError(f"{key}: missing key(s) {', '.join(f'{key}.{name}' for name in missing)}")
    for name in ("model", "hardware"):
        if not isinstance(section[name], str) or not section[name]:
            raise ConfigError(f"{key}.{name} must be a non-empty string, got {section[name]!r}")
    base = section["base"]
    if not isinstance(base, Mapping) or set(base) != set(SWEEP_QUANTITIES):
        raise ConfigError(f"{key}.base must map exactly {', '.join(SWEEP_QUANTITIES)} to integers, got {base!r}")
    base_workload = Workload(**{name: _positive_int(base[name], f"{key}.base.{name}") for name in SWEEP_QUANTITIES})
    sweeps = section["sweeps"]
    if not isinstance(sweeps, Mapping) or not sweeps:
        raise ConfigError(f"{key}.sweeps must be a non-empty mapping of {', '.join(SWEEP_QUANTITIES)} to lists")
    parsed = []
    for quantity, values in sweeps.items():
        where = f"{key}.sweeps.{quantity}"
        if quantity not in SWEEP_QUANTITIES:
            raise ConfigError(f"{where}: unknown sweep (allowed: {', '.join(SWEEP_QUANTITIES)})")
        if not isinstance(values, list) or len(values) < 2:
            raise ConfigError(f"{where} must be a list of at least two integers, got {values!r}")
        checked = tuple(_positive_int(value, f"{where}[{index}]") for index, value in enumerate(values))
        if len(set(checked)) != len(checked):
            raise ConfigError(f"{where} repeats a value: {list(checked)}")
        parsed.append((quantity, checked))
    seed = section.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"{key}.seed must be an integer >= 0, got {seed!r}")
    return CharacterisationConfig(section["model"], section["hardware"], base_workload, tuple(parsed), seed)


def resolve_characterisation(config: CharacterisationConfig, catalog: ArchitectureCatalog,
                             hardware: Mapping[str, Hardware], key: str = CONFIG_KEY
                             ) -> tuple[Architecture, Hardware]:
    """The configured architecture and GPU; `ConfigError` names ``characterisation.model`` or ``.hardware``."""
    if config.model not in catalog:
        raise ConfigError(f"{key}.model = '{config.model}' is not in the models file "
                          f"(known: {', '.join(catalog.names)})")
    if config.hardware not in hardware:
        raise ConfigError(f"{key}.hardware = '{config.hardware}' is not in the hardware file "
                          f"(known: {', '.join(hardware)})")
    return catalog[config.model], hardware[config.hardware]
