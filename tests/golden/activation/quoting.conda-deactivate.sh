# gpuenv: deactivate with conda
if command -v gpuenv_deactivate >/dev/null 2>&1; then
    gpuenv_deactivate
fi
