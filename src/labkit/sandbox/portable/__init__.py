"""The portable sandbox back end: a worker process per check, on any system Python runs on."""
