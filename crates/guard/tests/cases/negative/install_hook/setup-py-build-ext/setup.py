import subprocess
from setuptools import setup, Extension
from setuptools.command.build_ext import build_ext


class CMakeBuild(build_ext):
    def run(self):
        subprocess.check_call(["cmake", "-S", ".", "-B", "build"])
        subprocess.check_call(["cmake", "--build", "build", "--config", "Release"])
        super().run()


setup(
    name="fasthash",
    version="1.0.0",
    ext_modules=[Extension("fasthash._core", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    entry_points={"console_scripts": ["fasthash=fasthash.cli:main"]},
)
