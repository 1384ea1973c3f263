"""pip install ./python — builds the `deepinfer` package through CMake: the extension is the CMake
target deepinfer_python, with the same flags as the C++ build, so Python generates exactly what
the CLI does. Needs cmake, ninja-build and the Debian packages of scripts/install_deps.sh. pip's
default build isolation downloads setuptools and wheel; offline, with both installed:
`pip install --no-build-isolation ./python`. DEEPINFER_CMAKE_ARGS adds configure options
(e.g. "-DDEEPINFER_NATIVE=OFF"), DEEPINFER_BUILD_JOBS limits the build's parallelism, and
DEEPINFER_CMAKE_BUILD_DIR reuses an already configured build folder (only the target is built)."""
import glob
import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build_dir = os.environ.get("DEEPINFER_CMAKE_BUILD_DIR")
        if not build_dir:
            build_dir = os.path.abspath(os.path.join(self.build_temp, "cmake"))
            subprocess.check_call(["cmake", "-S", ROOT, "-B", build_dir, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                                   "-DDEEPINFER_BUILD_TESTS=OFF", "-DDEEPINFER_BUILD_BENCH=OFF",
                                   "-DDEEPINFER_BUILD_PYTHON=ON", f"-DPython3_EXECUTABLE={sys.executable}"]
                                  + os.environ.get("DEEPINFER_CMAKE_ARGS", "").split())
        jobs = os.environ.get("DEEPINFER_BUILD_JOBS")
        subprocess.check_call(["cmake", "--build", build_dir, "--target", "deepinfer_python"]
                              + (["-j", jobs] if jobs else []))
        built = glob.glob(os.path.join(build_dir, "python", "deepinfer", "_deepinfer*.so"))
        if len(built) != 1:
            raise RuntimeError(f"expected one built extension in {build_dir}/python/deepinfer, found {built}")
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(built[0], target)


setup(
    name="deepinfer",
    version="0.1.0",
    description="DeepSeek V4 inference with vLLM's offline API (LLM, SamplingParams), prompt encoding and output parsing",
    packages=["deepinfer"],
    ext_modules=[Extension("deepinfer._deepinfer", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    python_requires=">=3.9",
    zip_safe=False,
)
