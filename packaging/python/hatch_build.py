"""Puts one platform's sparkdap binary into the wheel and tags the wheel
for that platform. scripts/dist sets SPARKDAP_BINARY (the binary built for
the platform) and SPARKDAP_WHEEL_PLATFORM (its wheel platform tag)."""

import os

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class SparkdapBinary(BuildHookInterface):
    def initialize(self, version, build_data):
        binary = os.environ.get("SPARKDAP_BINARY")
        platform = os.environ.get("SPARKDAP_WHEEL_PLATFORM")
        if not binary or not platform:
            raise RuntimeError(
                "SPARKDAP_BINARY and SPARKDAP_WHEEL_PLATFORM must be set: "
                "build the wheels with scripts/dist"
            )
        if not os.path.isfile(binary):
            raise RuntimeError("SPARKDAP_BINARY %s is not a file" % binary)
        name = "sparkdap.exe" if platform.startswith("win") else "sparkdap"
        build_data["force_include"][binary] = "sparkdap/bin/" + name
        # The package holds no Python extension: any Python 3 on the
        # platform runs it.
        build_data["pure_python"] = False
        build_data["tag"] = "py3-none-" + platform
