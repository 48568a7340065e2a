"""Pure helpers of the QUERY_UNDERSTAND stage (:mod:`rag_lab.pipeline.plugins.query_understand`),
kept apart from the plugin so the stage module reads as the stage: :mod:`.prompt` (the request:
structured-output schema, allowed intents, the ``conversation`` / ``query`` placeholders, the asker
background), :mod:`.parse` (the reply: tolerant JSON, recovery of a cut reply, the rewrite check)
and :mod:`.smalltalk` (the offline greeting / small-talk detector). No model, no I/O."""
