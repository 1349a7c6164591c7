# gpuenv: activate with conda
. '/home/u/.local/share/gpuenv/store/it'\''s a "test" $(touch pwned) `id` \n; *[x]/etc/gpuenv/activate.sh'
