"""pip install ./python — builds the `deepinfer` extension from the C++ sources in ../src with the
system compiler. Needs (Debian): g++, python3-dev, pybind11-dev, libfmt-dev, libpcre2-dev,
nlohmann-json3-dev. Offline installs need setuptools and wheel already present, e.g.
`pip install --no-build-isolation ./python`. The CMake target deepinfer_python is the supported route."""
import glob
import os

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SOURCES = ["deepinfer_module.cpp"] + [
    os.path.relpath(path, HERE)
    for folder in ("src/encoding", "src/encoding/jinja", "src/tokenizer", "src/core")
    for path in sorted(glob.glob(os.path.join(ROOT, folder, "*.cpp")))
]

setup(
    name="deepinfer",
    version="0.1.0",
    description="DeepSeek prompt encoding and streaming output parsing (deepinfer bindings)",
    ext_modules=[Extension(
        "deepinfer", SOURCES, language="c++",
        include_dirs=[os.path.join(ROOT, "src"), os.path.join(ROOT, "include")],
        extra_compile_args=["-std=c++20", "-O2"],
        libraries=["fmt", "pcre2-8", "pthread"],
    )],
    zip_safe=False,
)
