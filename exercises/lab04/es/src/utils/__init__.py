"""The phase's shared utilities: `utils.seeding` and `utils.logging`.

Later labs import them as `from utils.seeding import seed_everything` and
`from utils.logging import get_logger`.
"""
