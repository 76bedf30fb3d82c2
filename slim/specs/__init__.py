"""What is served and on what: transformer architectures (`config/models.yaml`) and
accelerators (`config/hardware.yaml`), as frozen dataclasses with units in their names."""
