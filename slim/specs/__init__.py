"""What is served and on what: transformer architectures and accelerators, as frozen dataclasses
with units in their names, and their catalogs (`models.yaml`, `hardware.yaml` beside these modules,
shipped as package data so that an installed `slim` command has them)."""
