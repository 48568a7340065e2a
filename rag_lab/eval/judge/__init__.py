"""Judges you can check: agreement of an LLM judge with human labels (:mod:`.agreement`, pure
maths; :mod:`.labels`, the labels file; :mod:`.calibrate`, ``rag-lab judge calibrate``) and the
spread of a judge's repeated scores (:mod:`.repeats`, ``eval --judge-repeats N``)."""
