"""The settings a default `sparkdap wrap` bakes into the wrapper's header
(workerwrap/template/header.py.tmpl), for tests to start from."""


def default_settings(**over):
    """The settings the header of a default `sparkdap wrap` bakes, with
    `over` changed."""
    settings = {
        "ide": "dap",
        "proxy": "127.0.0.1:5678",
        "token_env": "SPARKDAP_TOKEN",
        "token": None,
        "partitions": None,
        "stages": None,
        "sample_rate": 1.0,
        "connect_timeout": 3.0,
        "handshake_timeout": 10.0,
        "wait": False,
        "post_mortem": False,
        "lease": 60.0,
        "proxy_backoff": 60.0,
        # render.go bakes buildinfo.Version; a made-up one here, so that
        # a test tells it from anything else.
        "sparkdap_version": "9.8.7-test",
    }
    settings.update(over)
    return settings
