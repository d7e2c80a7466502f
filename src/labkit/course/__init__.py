"""What a lab is: the catalogue (`labs.toml`), each lab's checks (`checks.toml`), the
solution/stub markers, and the authors' tools (`dev build`, `dev check`, `dev new`).

Pure data and text: imports only the base modules (results, i18n, files). Grading a
solution for `dev check` is handed in by the caller, so the course never depends on the
engine.
"""
