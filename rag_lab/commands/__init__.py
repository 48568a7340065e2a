"""The command-line modules of ``rag-lab`` (:mod:`rag_lab.cli` registers them): thin argparse
front ends over the library, at the top of the layers with ``cli`` so that the evaluation package
below them never builds a :class:`~rag_lab.lab.lab.Lab` itself.

- :mod:`.evaluate`: ``eval``, ``sweep``, ``report``, ``gate``, ``convert`` (``calibrate`` in
  :mod:`.calibrate`)
- :mod:`.cache`: ``cache`` (the stage and vector caches)
- :mod:`.runs`: ``runs`` (the run history)
- :mod:`.testset`: ``testset`` (synthetic question sets)
- :mod:`.judge`: ``judge serve`` and ``judge calibrate``
- :mod:`.convert`: ``scripts/convert_datasets.py`` (the bundled-dataset converters by name)
"""
