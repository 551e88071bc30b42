import os
import subprocess
from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def git_version():
    try:
        out = subprocess.check_output(["git", "describe", "--tags"], cwd=HERE)
        return out.decode().strip().lstrip("v")
    except Exception:
        return "0.0.0"


class BuildWithVersion(build_py):
    def run(self):
        path = os.path.join(HERE, "geo_tools", "_version.py")
        with open(path, "w") as fh:
            fh.write(f'__version__ = "{git_version()}"\n')
        super().run()


with open(os.path.join(HERE, "README.md"), encoding="utf-8") as fh:
    long_description = fh.read()

setup(
    name="geo-tools",
    version=git_version(),
    long_description=long_description,
    packages=["geo_tools"],
    cmdclass={"build_py": BuildWithVersion},
    entry_points={"console_scripts": ["geo=geo_tools.cli:main"]},
)
