### LANG en
"""The phase's shared utilities: `utils.seeding` and `utils.logging`.

Later labs import them as `from utils.seeding import seed_everything` and
`from utils.logging import get_logger`.
"""
### LANG es
# """Las utilidades compartidas de la fase: `utils.seeding` y `utils.logging`.
#
# Los laboratorios siguientes las importan como `from utils.seeding import seed_everything` y
# `from utils.logging import get_logger`.
# """
### END LANG
