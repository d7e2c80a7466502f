"""Las utilidades compartidas de la fase: `utils.seeding` y `utils.logging`.

Los laboratorios siguientes las importan como `from utils.seeding import seed_everything` y
`from utils.logging import get_logger`.
"""
