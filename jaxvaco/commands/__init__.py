"""The `jaxvaco` commands, one module each (`jaxvaco.cli` dispatches to them); `common`
holds what they share: parsing with tyro and reporting failures as one line."""
