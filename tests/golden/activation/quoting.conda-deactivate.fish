# gpuenv: deactivate with conda
if functions -q gpuenv_deactivate
    gpuenv_deactivate
end
