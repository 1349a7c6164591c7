"""The caller's variables that shape what a build compiles, which builds do not see.

A build's identity (``builds.model.compute_identity``) names its cache entry, and every
machine that installs the lock reuses that entry: whatever changes the compiled output
must be part of the identity, or the first builder decides for everyone. gpuenv's
choice: the variables a build's output depends on reach it only from the lock (the
spec's ``[pip.build.NAME] env``, recorded in the lock and covered by the identity, and
the values gpuenv sets itself: ``TORCH_CUDA_ARCH_LIST``, ``CC``/``CXX``, ``CUDA_HOME``).
The same variables inherited from the caller's shell are dropped from the build's
environment: compiler and linker flags and search paths, nvcc's and CMake's knobs, and
the switches of the CUDA extensions gpuenv builds (``FLASH_ATTENTION_*`` and the like),
plus any variable named after the package being built (``FLASH_ATTN_*`` for flash-attn).
"""

from __future__ import annotations

# Compiler, linker and build-tool settings read by setuptools, torch's cpp_extension,
# nvcc and CMake.
SHAPING = frozenset(
    {
        "CFLAGS",
        "CXXFLAGS",
        "CPPFLAGS",
        "LDFLAGS",
        "LDSHARED",
        "LDLIBS",
        "ARCHFLAGS",
        "OPT",
        "CPATH",
        "C_INCLUDE_PATH",
        "CPLUS_INCLUDE_PATH",
        "LIBRARY_PATH",
        "PKG_CONFIG_PATH",
        "NVCC_APPEND_FLAGS",
        "NVCC_PREPEND_FLAGS",
        "NVCC_FLAGS",
        "NVCC_THREADS",
        "CUDA_NVCC_FLAGS",
        "TORCH_NVCC_FLAGS",
        "CMAKE_ARGS",
        "CMAKE_BUILD_TYPE",
        "CMAKE_GENERATOR",
        "CMAKE_PREFIX_PATH",
        "CMAKE_TOOLCHAIN_FILE",
        "SETUPTOOLS_SCM_PRETEND_VERSION",
    }
)
# Switches of the extensions gpuenv knows how to build (builds/data/packages.toml) and
# of torch's extension builder.
SHAPING_PREFIXES = (
    "FLASH_ATTENTION_",
    "FLASH_ATTN_",
    "XFORMERS_",
    "APEX_",
    "DS_BUILD_",
    "VLLM_",
    "MAMBA_",
    "CAUSAL_CONV1D_",
    "NVTE_",
    "TORCH_CUDA_",
)


def shapes_build(name: str, package: str) -> bool:
    """Whether the caller's variable ``name`` would shape the build of ``package`` (and
    so is not passed to it: declare it in the spec instead)."""
    own = package.upper().replace("-", "_").replace(".", "_") + "_"
    return name in SHAPING or name.startswith((*SHAPING_PREFIXES, own))
