"""The project itself in each target's prefix: installed editable, after the locked
packages, with ``--no-deps`` (its dependencies are in the lock).

Its build is a build like any other (``gpuenv.builds``): the target's arch list, the
toolkit, the checked host compiler, supervised and logged, cached in the store by an
identity. The identity's source is the project's tree as its build sees it
(``gpuenv._srctree.tree_key``: build configuration and native sources, not its Python
files), so an unchanged tree is never rebuilt, a changed ``.cu`` file is (once per
target), and an edited ``.py`` file is seen at once, with no build. What the build
produced is installed as an editable wheel (``editable.wheel``): the source tree for
the packages, this prefix's own compiled modules beside them.

The prefix records what it holds in ``etc/gpuenv/project.json`` (the tree key it was
built from: ``gpuenv run`` compares it with the tree's, ``gpuenv install`` rebuilds),
and lists the build in ``etc/gpuenv/builds.json`` (``gc`` keeps its cache entry,
``verify`` imports its compiled modules and reads their GPU code).
"""
