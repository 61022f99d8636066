"""The running process: `create_app` and its state, start-up to exit, the listener's defences, readiness,
the admin listener."""
