"""`gpuenv init`: write a commented starter gpuenv.toml."""
